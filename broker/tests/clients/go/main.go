// Command franzgo runs the real-client suite's scenarios with franz-go (github.com/twmb/franz-go/pkg/kgo) and
// prints what happened as one JSON object on stdout; broker/tests/clients/client_programs.py drives it.
//
//	franzgo produce-idempotent BOOTSTRAP TOPIC PARTITIONS COUNT
//	franzgo produce-transactional BOOTSTRAP TOPIC PARTITIONS TRANSACTIONAL_ID PLAN   (PLAN: commit:6,abort:4,...)
//	franzgo consume BOOTSTRAP TOPIC PARTITIONS ISOLATION EXPECTED                  (read_committed|read_uncommitted)
//
// MIRRORLOG_TLS_CA and MIRRORLOG_SASL_MECHANISM / _USER / _PASSWORD, when set, secure every connection.
//
// Record i of a run goes to partition i % PARTITIONS. Every result is {"records": [[partition, offset, value],
// ...]}, for a transactional run one such list per transaction under "transactions".
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Each step (a produce, a transaction's end, a consumer's wait) must finish within this.
const stepTimeout = 30 * time.Second

// A consumer that has what it expects waits this long for records it should not see.
const idleAfterExpected = time.Second

type record = [3]any

type transaction struct {
	Outcome string   `json:"outcome"`
	Records []record `json:"records"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "franzgo:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 4 {
		return errors.New("usage: franzgo produce-idempotent|produce-transactional|consume BOOTSTRAP TOPIC PARTITIONS ...")
	}
	scenario, bootstrap, topic := args[0], args[1], args[2]
	security, err := securityOptions()
	if err != nil {
		return err
	}
	connection = security
	partitions, err := strconv.Atoi(args[3])
	if err != nil {
		return fmt.Errorf("PARTITIONS: %w", err)
	}
	var result any
	switch {
	case scenario == "produce-idempotent" && len(args) == 5:
		count, err := strconv.Atoi(args[4])
		if err != nil {
			return fmt.Errorf("COUNT: %w", err)
		}
		result, err = produceIdempotent(bootstrap, topic, partitions, count)
		if err != nil {
			return err
		}
	case scenario == "produce-transactional" && len(args) == 6:
		result, err = produceTransactional(bootstrap, topic, partitions, args[4], args[5])
		if err != nil {
			return err
		}
	case scenario == "consume" && len(args) == 6:
		expected, err := strconv.Atoi(args[5])
		if err != nil {
			return fmt.Errorf("EXPECTED: %w", err)
		}
		result, err = consume(bootstrap, topic, partitions, args[4], expected)
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown scenario or wrong arguments: %q", args)
	}
	return json.NewEncoder(os.Stdout).Encode(result)
}

// The secured-listener tests' TLS and SASL options (none by default), added to every client.
var connection []kgo.Opt

// securityOptions reads TLS (MIRRORLOG_TLS_CA: a PEM CA bundle) and SASL/SCRAM (MIRRORLOG_SASL_MECHANISM,
// MIRRORLOG_SASL_USER, MIRRORLOG_SASL_PASSWORD) settings from the environment.
func securityOptions() ([]kgo.Opt, error) {
	var options []kgo.Opt
	if path := os.Getenv("MIRRORLOG_TLS_CA"); path != "" {
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("MIRRORLOG_TLS_CA: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("MIRRORLOG_TLS_CA: no certificate in %s", path)
		}
		options = append(options, kgo.DialTLSConfig(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}))
	}
	if mechanism := os.Getenv("MIRRORLOG_SASL_MECHANISM"); mechanism != "" {
		auth := scram.Auth{User: os.Getenv("MIRRORLOG_SASL_USER"), Pass: os.Getenv("MIRRORLOG_SASL_PASSWORD")}
		switch mechanism {
		case "SCRAM-SHA-256":
			options = append(options, kgo.SASL(auth.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			options = append(options, kgo.SASL(auth.AsSha512Mechanism()))
		default:
			return nil, fmt.Errorf("MIRRORLOG_SASL_MECHANISM: %q is not SCRAM-SHA-256 or SCRAM-SHA-512", mechanism)
		}
	}
	return options, nil
}

func producerOptions(bootstrap, topic string) []kgo.Opt {
	// franz-go producers are idempotent unless told otherwise; acks=all is what idempotence needs.
	return append([]kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5 * time.Millisecond),
	}, connection...)
}

// produceSync sends the records and returns [partition, offset, value] of each, in the order given.
func produceSync(client *kgo.Client, records []*kgo.Record) ([]record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	results := client.ProduceSync(ctx, records...)
	if err := results.FirstErr(); err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	out := make([]record, 0, len(results))
	for _, r := range results {
		out = append(out, record{r.Record.Partition, r.Record.Offset, string(r.Record.Value)})
	}
	return out, nil
}

func makeRecords(prefix string, count, partitions int) []*kgo.Record {
	records := make([]*kgo.Record, count)
	for i := range records {
		records[i] = &kgo.Record{Partition: int32(i % partitions), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
	}
	return records
}

func produceIdempotent(bootstrap, topic string, partitions, count int) (any, error) {
	client, err := kgo.NewClient(producerOptions(bootstrap, topic)...)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	records, err := produceSync(client, makeRecords("idempotent", count, partitions))
	if err != nil {
		return nil, err
	}
	return map[string]any{"records": records}, nil
}

func produceTransactional(bootstrap, topic string, partitions int, transactionalID, plan string) (any, error) {
	options := append(producerOptions(bootstrap, topic), kgo.TransactionalID(transactionalID))
	client, err := kgo.NewClient(options...)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	var done []transaction
	for n, step := range strings.Split(plan, ",") {
		outcome, countText, _ := strings.Cut(step, ":")
		count, err := strconv.Atoi(countText)
		if err != nil || (outcome != "commit" && outcome != "abort") {
			return nil, fmt.Errorf("PLAN step %q: want commit:N or abort:N", step)
		}
		if err := client.BeginTransaction(); err != nil {
			return nil, fmt.Errorf("begin transaction %d: %w", n, err)
		}
		// ProduceSync returns once every record is acknowledged, so an aborted transaction's records are in the
		// log before the abort.
		records, err := produceSync(client, makeRecords(fmt.Sprintf("txn%d-%s", n, outcome), count, partitions))
		if err != nil {
			return nil, fmt.Errorf("transaction %d: %w", n, err)
		}
		end := kgo.TryCommit
		if outcome == "abort" {
			end = kgo.TryAbort
		}
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		err = client.EndTransaction(ctx, end)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("end transaction %d (%s): %w", n, outcome, err)
		}
		done = append(done, transaction{Outcome: outcome, Records: records})
	}
	return map[string]any{"transactions": done}, nil
}

func consume(bootstrap, topic string, partitions int, isolation string, expected int) (any, error) {
	level := kgo.ReadUncommitted()
	switch isolation {
	case "read_committed":
		level = kgo.ReadCommitted()
	case "read_uncommitted":
	default:
		return nil, fmt.Errorf("ISOLATION must be read_committed or read_uncommitted, not %q", isolation)
	}
	assigned := make(map[int32]kgo.Offset, partitions)
	for p := 0; p < partitions; p++ {
		assigned[int32(p)] = kgo.NewOffset().AtStart()
	}
	client, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assigned}),
		kgo.FetchIsolationLevel(level),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, connection...)...)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	records := []record{}
	deadline := time.Now().Add(stepTimeout)
	for time.Now().Before(deadline) {
		wait := time.Until(deadline)
		if len(records) >= expected {
			wait = idleAfterExpected
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		fetches := client.PollFetches(ctx)
		cancel()
		for _, fetchErr := range fetches.Errors() {
			if !errors.Is(fetchErr.Err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("fetch %s/%d: %w", fetchErr.Topic, fetchErr.Partition, fetchErr.Err)
			}
		}
		before := len(records)
		fetches.EachRecord(func(r *kgo.Record) {
			records = append(records, record{r.Partition, r.Offset, string(r.Value)})
		})
		if len(records) == before && len(records) >= expected {
			break
		}
	}
	return map[string]any{"records": records}, nil
}
