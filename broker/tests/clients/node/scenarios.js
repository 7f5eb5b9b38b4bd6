// The real-client suite's scenarios with kafkajs; prints what happened as one JSON object on stdout
// (broker/tests/clients/client_programs.py drives it). kafkajs has no consumer without group membership: its
// consumer joins a group.
//
//   node scenarios.js produce-idempotent BOOTSTRAP TOPIC PARTITIONS COUNT
//   node scenarios.js produce-transactional BOOTSTRAP TOPIC PARTITIONS TRANSACTIONAL_ID PLAN   (commit:6,abort:4,...)
//   node scenarios.js consume-group BOOTSTRAP TOPIC PARTITIONS GROUP COUNT
//     (subscribes as a member of GROUP from the group's committed offsets, or the beginning; reads COUNT records,
//     committing as kafkajs does by default, then leaves the group)
//   node scenarios.js group-member BOOTSTRAP TOPIC PARTITIONS GROUP
//     (a member of GROUP until killed: prints each record it processed as a JSON line {"partition": P,
//     "offset": O} and commits it, or {"commit_refused": E} when a rebalance refused the commit)
//
// Record i of a run goes to partition i % PARTITIONS. Every result is {"records": [[partition, offset, value],
// ...]}, for a transactional run one such list per transaction under "transactions".
'use strict'

const { Kafka, Partitioners, logLevel } = require('kafkajs')

function client(bootstrap) {
  return new Kafka({
    clientId: 'mirrorlog-client-suite',
    brokers: [bootstrap],
    connectionTimeout: 5000,
    requestTimeout: 10000,
    logLevel: logLevel.WARN,
    // Logs go to stderr: stdout carries the result.
    logCreator: () => ({ namespace, log }) => {
      process.stderr.write(`kafkajs ${namespace}: ${JSON.stringify(log)}\n`)
    },
  })
}

// Sends COUNT values "PREFIX-i" to partition i % PARTITIONS, one record per request, so that each produce
// response names the record's offset; returns [partition, offset, value] for each.
async function send(sender, topic, partitions, prefix, count) {
  const records = []
  for (let i = 0; i < count; i++) {
    const value = `${prefix}-${i}`
    const partition = i % partitions
    const [result] = await sender.send({ topic, acks: -1, messages: [{ value, partition }] })
    if (result.errorCode !== 0 || result.partition !== partition) {
      throw new Error(`send ${value}: ${JSON.stringify(result)}`)
    }
    records.push([partition, Number(result.baseOffset), value])
  }
  return records
}

// kafkajs needs maxInFlightRequests 1 for idempotence; createPartitioner is set only to silence its warning
// about the v2 default partitioner (every record names its partition).
const PRODUCER = { idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner }

async function produceIdempotent(bootstrap, topic, partitions, count) {
  const producer = client(bootstrap).producer(PRODUCER)
  await producer.connect()
  try {
    return { records: await send(producer, topic, partitions, 'idempotent', count) }
  } finally {
    await producer.disconnect()
  }
}

async function produceTransactional(bootstrap, topic, partitions, transactionalId, plan) {
  const producer = client(bootstrap).producer({ ...PRODUCER, transactionalId })
  await producer.connect()
  const transactions = []
  try {
    for (const [n, step] of plan.split(',').entries()) {
      const [outcome, countText] = step.split(':')
      const count = Number(countText)
      if (!['commit', 'abort'].includes(outcome) || !Number.isInteger(count)) {
        throw new Error(`PLAN step ${step}: want commit:N or abort:N`)
      }
      const transaction = await producer.transaction()
      // Each send waits for its produce response, so an aborted transaction's records are in the log.
      const records = await send(transaction, topic, partitions, `txn${n}-${outcome}`, count)
      if (outcome === 'commit') {
        await transaction.commit()
      } else {
        await transaction.abort()
      }
      transactions.push({ outcome, records })
    }
    return { transactions }
  } finally {
    await producer.disconnect()
  }
}

async function consumeGroup(bootstrap, topic, groupId, count) {
  const consumer = client(bootstrap).consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 })
  await consumer.connect()
  const records = []
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${records.length} of ${count} records in 60 s`)), 60000)
      consumer
        .run({
          eachMessage: async ({ partition, message }) => {
            records.push([partition, Number(message.offset), message.value.toString()])
            if (records.length >= count) {
              clearTimeout(timer)
              resolve()
            }
          },
        })
        .catch(reject)
    })
    return { records }
  } finally {
    await consumer.disconnect()
  }
}

// Runs until the process is killed; its output is a JSON line per record (see the header), not one result.
async function groupMember(bootstrap, topic, groupId) {
  const consumer = client(bootstrap).consumer({ groupId, sessionTimeout: 6000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      // Slow enough that a kill lands mid-stream.
      await new Promise((resolve) => setTimeout(resolve, 10))
      process.stdout.write(JSON.stringify({ partition, offset: Number(message.offset) }) + '\n')
      try {
        await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }])
      } catch (error) {
        // The record is processed again by whoever gets the partition.
        process.stdout.write(JSON.stringify({ commit_refused: error.type || error.name }) + '\n')
      }
    },
  })
  await new Promise(() => {})
}

async function main(args) {
  const [scenario, bootstrap, topic, partitionsText, ...rest] = args
  const partitions = Number(partitionsText)
  if (scenario === 'produce-idempotent' && rest.length === 1) {
    return produceIdempotent(bootstrap, topic, partitions, Number(rest[0]))
  }
  if (scenario === 'produce-transactional' && rest.length === 2) {
    return produceTransactional(bootstrap, topic, partitions, rest[0], rest[1])
  }
  if (scenario === 'consume-group' && rest.length === 2) {
    return consumeGroup(bootstrap, topic, rest[0], Number(rest[1]))
  }
  if (scenario === 'group-member' && rest.length === 1) {
    return groupMember(bootstrap, topic, rest[0])
  }
  throw new Error('usage: node scenarios.js produce-idempotent|produce-transactional|consume-group BOOTSTRAP TOPIC PARTITIONS ...')
}

main(process.argv.slice(2)).then(
  (result) => process.stdout.write(JSON.stringify(result) + '\n'),
  (error) => {
    process.stderr.write(`scenarios.js: ${error.stack || error}\n`)
    process.exit(1)
  },
)
