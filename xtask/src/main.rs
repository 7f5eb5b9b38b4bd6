//! Project automation, in Rust so it runs wherever cargo does (the `cargo xtask` pattern).
//!
//! - `cargo xtask test`: installs what the build needs from the system when missing (or stops with the exact
//!   command), then `cargo fmt --all --check`, `cargo clippy --workspace --all-targets -- -D warnings` and
//!   `cargo test --workspace`, then the simulator's barrier claims over 1,000 seeds in the release profile
//!   (`mirror-sim/tests/many_seeds.rs`; its graph has no RocksDB), then the real-client suite (below). This is
//!   the README's test command and what `.ci/run` calls. Last, the reference-Kafka suite (below).
//! - `cargo xtask clients [pytest args]`: only the real-client suite (`broker/tests/clients`): pytest in a virtual
//!   environment it creates under the target directory (pinned confluent-kafka, kafka-python, aiokafka), with
//!   kafkajs (npm), Apache Kafka's Java client (Maven) and franz-go (Go) built by the suite itself; every test
//!   runs against `mirrorlog serve` and against Apache Kafka (the jars below). Node.js, Go, Java 17+ and Maven
//!   are installed with apt-get when missing.
//! - `cargo xtask repo-checks`: the repository checks `test` starts with — no tracked file refers to a path
//!   outside the repository, every ADR has a `Status:` line.
//! - `cargo xtask model [--topology active-passive|failback|chain|all] [--depth N] [--source-writes N]
//!   [--local-writes N] [--crashes N] [--source-errors N] [--mutant NAME]`: the exhaustive model check (`mirror-model`) beyond the CI
//!   bounds, in release mode; prints states explored, time, and every violated property with its steps.
//! - `cargo xtask kafka [pytest args]`: only the reference-Kafka suite (`interop/tests`): Apache Kafka from the
//!   jars `interop/kafka/pom.xml` pins (fetched with Maven into the target directory; Java 17+ and Maven are
//!   installed with apt-get when missing), driven by pytest in the client suite's virtual environment, with
//!   `MIRRORLOG_BIN` naming the debug `mirrorlog` binary it builds first (the both-ways tests run it).
//! - `cargo xtask bench [--quick] [--backends fs,sled,rocks,memory] [--only ID]... [--out DIR]`: builds in release
//!   mode, runs the micro-benchmark headlines (criterion), mirroring between two `serve` nodes
//!   (`broker/benches/mirror_links.rs`, printed), the cross-backend macro benchmark (`storage-bench`'s
//!   `bench-report`) and the peer benchmark against Apache Kafka, and writes `DIR/report.md`, `DIR/report.json` and SVG charts (default
//!   `target/bench-report`); with `--publish` it then writes that run into `docs/` (`bench-report.json`,
//!   `peer.json`, `bench-charts/`, the generated tables of `benchmarks.md`, which a test keeps equal to the JSON).
//!   `cargo xtask bench --compare OLD.json NEW.json` prints the ratio per measurement and
//!   flags regressions beyond the measured noise.
//! - `cargo xtask fuzz <target> [seconds]`: runs a cargo-fuzz target (installs cargo-fuzz on first use).

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Something the build needs from the system, and the Debian package that provides it.
struct SystemRequirement {
    /// What to look for.
    probe: Probe,
    debian_package: &'static str,
    why: &'static str,
}

/// How to tell whether a requirement is met.
enum Probe {
    /// A program on the `PATH`.
    Program(&'static str),
    /// A shared library the dynamic linker (or LLVM's directories) can find, by file-name prefix.
    Library(&'static str),
}

/// What the workspace's build scripts need beyond Rust itself.
const SYSTEM_REQUIREMENTS: &[SystemRequirement] = &[
    SystemRequirement {
        probe: Probe::Program("cc"),
        debian_package: "gcc",
        why: "zstd-sys compiles the zstd C library",
    },
    SystemRequirement {
        probe: Probe::Program("c++"),
        debian_package: "g++",
        why: "librocksdb-sys compiles RocksDB (C++)",
    },
    SystemRequirement {
        probe: Probe::Library("libclang.so"),
        debian_package: "libclang-dev",
        why: "librocksdb-sys generates its bindings with bindgen, which loads libclang",
    },
];

impl Probe {
    fn found(&self) -> bool {
        match self {
            Probe::Program(program) => on_path(program),
            Probe::Library(prefix) => library_present(prefix),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Probe::Program(name) | Probe::Library(name) => name,
        }
    }
}

/// Looks for a shared library in the linker cache and in Debian's LLVM directories.
fn library_present(prefix: &str) -> bool {
    let in_cache = Command::new("ldconfig")
        .arg("-p")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains(prefix));
    let in_llvm = std::fs::read_dir("/usr/lib").is_ok_and(|entries| {
        entries.flatten().any(|entry| {
            entry.file_name().to_string_lossy().starts_with("llvm-")
                && std::fs::read_dir(entry.path().join("lib")).is_ok_and(|libs| {
                    libs.flatten()
                        .any(|lib| lib.file_name().to_string_lossy().starts_with(prefix))
                })
        })
    });
    in_cache || in_llvm
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn cargo() -> Command {
    let mut command = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(workspace_root());
    command
}

fn on_path(program: &str) -> bool {
    env::var_os("PATH").is_some_and(|paths| env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

fn run(step: &str, command: &mut Command) -> Result<(), String> {
    eprintln!("==> {step}");
    let status = command
        .status()
        .map_err(|e| format!("{step}: cannot start: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{step} failed ({status})"))
    }
}

/// What the real-client suite builds its non-Python clients with (broker/tests/clients/programs.py).
const CLIENT_TOOLCHAINS: &[SystemRequirement] = &[
    SystemRequirement {
        probe: Probe::Program("node"),
        debian_package: "nodejs",
        why: "runs the kafkajs client",
    },
    SystemRequirement {
        probe: Probe::Program("npm"),
        debian_package: "npm",
        why: "installs kafkajs from the lock file",
    },
    SystemRequirement {
        probe: Probe::Program("go"),
        debian_package: "golang-go",
        why: "builds the franz-go client",
    },
];

/// Installs the workspace's missing system packages with apt-get when possible, else names the command to run.
fn ensure_system_requirements() -> Result<(), String> {
    install_missing(SYSTEM_REQUIREMENTS)
}

/// Installs the missing packages among `requirements` with apt-get when possible, else names the command to run.
fn install_missing(requirements: &[SystemRequirement]) -> Result<(), String> {
    let missing: Vec<&SystemRequirement> = requirements.iter().filter(|req| !req.probe.found()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let packages: Vec<&str> = missing.iter().map(|req| req.debian_package).collect();
    for req in &missing {
        eprintln!(
            "missing `{}` ({}): package {}",
            req.probe.name(),
            req.why,
            req.debian_package
        );
    }
    let install = format!("apt-get update && apt-get install -y {}", packages.join(" "));
    if is_root() && on_path("apt-get") {
        run(
            "install system packages",
            Command::new("sh").args(["-c", &install]),
        )?;
        return Ok(());
    }
    Err(format!(
        "install the missing system packages first:\n    sudo sh -c '{install}'"
    ))
}

/// Adds the rustup components the checks use when they are missing.
fn ensure_rust_components() -> Result<(), String> {
    for (component, probe) in [("rustfmt", "fmt"), ("clippy", "clippy")] {
        let present = cargo()
            .args([probe, "--version"])
            .output()
            .is_ok_and(|out| out.status.success());
        if !present {
            run(
                &format!("rustup component add {component}"),
                Command::new("rustup").args(["component", "add", component]),
            )?;
        }
    }
    Ok(())
}

fn test() -> Result<(), String> {
    check_repository()?;
    ensure_system_requirements()?;
    ensure_rust_components()?;
    run(
        "cargo fmt --all --check",
        cargo().args(["fmt", "--all", "--check"]),
    )?;
    run(
        "cargo clippy --workspace --all-targets -- -D warnings",
        cargo().args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]),
    )?;
    // The workspace build turns on `node`'s `simulator` feature (mirror-sim asks for it); the node as the broker
    // and `serve` build it, without the feature, must compile and lint clean too.
    run(
        "cargo clippy -p node --lib (without the simulator feature) -- -D warnings",
        cargo().args(["clippy", "-p", "node", "--lib", "--", "-D", "warnings"]),
    )?;
    run("cargo test --workspace", cargo().args(["test", "--workspace"]))?;
    run(
        "the barrier claims over 1,000 seeds, over a reliable and an unreliable network (release; \
         mirror-sim/tests/many_seeds.rs, network_faults.rs)",
        cargo()
            .args([
                "test",
                "--release",
                "-p",
                "mirror-sim",
                "--test",
                "many_seeds",
                "--test",
                "network_faults",
                "--",
                "--nocapture",
            ])
            .env("MIRRORLOG_SIM_SEEDS", "1000"),
    )?;
    client_suite(&[])?;
    kafka_suite(&[])?;
    eprintln!("==> all checks passed");
    Ok(())
}

/// Directories next to the repository that a session's machine has but a clone does not: a file that names one
/// works only where they happen to be.
const OUTSIDE_THE_REPOSITORY: &[&str] = &["shared", ".library", ".mirror"];

/// Repository hygiene that no compiler checks: no tracked file refers to a path outside the repository
/// (a sibling directory such as `shared` exists on one machine only), and every ADR has a `Status:` line.
/// The README's length: what it is, the two commands, a short tour; the rest in docs/ (issue 55).
const README_MAX_LINES: usize = 250;

fn check_repository() -> Result<(), String> {
    eprintln!("==> repository checks (paths outside the repository, ADR status lines, the README's length)");
    let root = workspace_root();
    let listed = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(&root)
        .output()
        .map_err(|e| format!("cannot run git ls-files: {e}"))?;
    if !listed.status.success() {
        return Err("git ls-files failed: the repository checks need a git clone".into());
    }
    // Built at run time so that this file does not name the paths it looks for.
    let needles: Vec<String> = OUTSIDE_THE_REPOSITORY
        .iter()
        .map(|dir| format!("{}/{dir}/", ".."))
        .collect();
    let mut problems = Vec::new();
    for path in listed
        .stdout
        .split(|&byte| byte == 0)
        .filter(|path| !path.is_empty())
    {
        let path = String::from_utf8_lossy(path).into_owned();
        // Binary files (segments, snapshots) and unreadable ones are not text that can refer to a path.
        let Ok(text) = std::fs::read_to_string(root.join(&path)) else {
            continue;
        };
        for (number, line) in text.lines().enumerate() {
            if let Some(needle) = needles.iter().find(|needle| line.contains(needle.as_str())) {
                problems.push(format!(
                    "{path}:{}: refers to `{needle}…`, outside the repository",
                    number + 1
                ));
            }
        }
        if path == "README.md" && text.lines().count() > README_MAX_LINES {
            problems.push(format!(
                "README.md: {} lines; a newcomer's page stays within {README_MAX_LINES} (the depth goes to docs/)",
                text.lines().count()
            ));
        }
        let is_adr = path.starts_with("docs/adr/") && path.ends_with(".md");
        if is_adr && !text.lines().take(6).any(|line| line.starts_with("Status: ")) {
            problems.push(format!(
                "{path}: no `Status:` line under the title (accepted, amended by …, superseded by …)"
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "repository checks failed:\n    {}",
            problems.join("\n    ")
        ))
    }
}

/// Where the real-client suite lives, and its pinned requirements.
const CLIENT_SUITE: &str = "broker/tests/clients";

/// The real-client suite: `mirrorlog serve` and Apache Kafka against librdkafka (confluent-kafka), kafka-python,
/// aiokafka, kafkajs, the Java client and franz-go; `pytest_args` go to pytest after the suite's path. The suite
/// builds the kafkajs, Java and franz-go programs itself under `<target>/client-programs` (CARGO_TARGET_DIR is
/// passed on so that it finds the target directory).
fn client_suite(pytest_args: &[String]) -> Result<(), String> {
    install_missing(CLIENT_TOOLCHAINS)?;
    check_go_version()?;
    ensure_java_and_maven()?;
    let libs = kafka_jars()?;
    let venv = client_venv()?;
    run(
        "cargo build -p mirrorlog",
        cargo().args(["build", "-p", "mirrorlog"]),
    )?;
    run(
        "real-client suite (pytest)",
        Command::new(venv.join("bin/python"))
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", CLIENT_SUITE])
            .args(pytest_args)
            .current_dir(workspace_root())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("CARGO_TARGET_DIR", target_dir())
            .env("MIRRORLOG_BIN", target_dir().join("debug/mirrorlog"))
            .env("MIRRORLOG_KAFKA_LIBS", &libs),
    )
}

/// The franz-go program's go.mod names the oldest Go that builds it (`go 1.26.0`); an older `go` (Debian
/// bookworm's golang-go is 1.19) cannot, so say so before the suite fails on it.
fn check_go_version() -> Result<(), String> {
    let go_mod_path = workspace_root().join(CLIENT_SUITE).join("go/go.mod");
    let go_mod = std::fs::read_to_string(&go_mod_path)
        .map_err(|e| format!("cannot read {}: {e}", go_mod_path.display()))?;
    let needed = go_mod
        .lines()
        .find_map(|line| line.strip_prefix("go "))
        .and_then(go_release)
        .ok_or_else(|| format!("{} has no `go` line", go_mod_path.display()))?;
    let out = Command::new("go")
        .arg("version")
        .output()
        .map_err(|e| format!("cannot run `go version`: {e}"))?;
    let reported = String::from_utf8_lossy(&out.stdout).into_owned();
    // "go version go1.26.8 linux/amd64"
    let found = reported
        .split_whitespace()
        .find_map(|word| word.strip_prefix("go").and_then(go_release));
    match found {
        Some(found) if found >= needed => Ok(()),
        _ => Err(format!(
            "the franz-go client needs Go {}.{} or newer ({}); `go version` says: {}\n    \
             install a newer Go toolchain (Debian bookworm's golang-go is 1.19)",
            needed.0,
            needed.1,
            go_mod_path.display(),
            reported.trim()
        )),
    }
}

/// `1.26.0` or `1.26.8` as (1, 26).
fn go_release(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.trim().split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// The Python the pytest suites run in: a virtual environment under the target directory that is created — and
/// refilled whenever the client suite's pinned requirements change — from PyPI.
fn client_venv() -> Result<PathBuf, String> {
    let requirements_path = workspace_root().join(CLIENT_SUITE).join("requirements.txt");
    let requirements = std::fs::read_to_string(&requirements_path)
        .map_err(|e| format!("cannot read {}: {e}", requirements_path.display()))?;
    let python = ["python3", "python"]
        .into_iter()
        .find(|program| on_path(program))
        .ok_or("the real-client suite needs Python 3 with venv:\n    sudo apt-get install -y python3 python3-venv")?;
    let venv = target_dir().join("client-venv");
    let stamp = venv.join("requirements.txt");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(requirements.as_str()) {
        let _ = std::fs::remove_dir_all(&venv);
        run(
            "create the client suite's virtual environment",
            Command::new(python).args(["-m", "venv"]).arg(&venv),
        )
        .map_err(|e| format!("{e}\n(on Debian: sudo apt-get install -y python3-venv)"))?;
        run(
            "install the pinned Kafka clients (confluent-kafka, kafka-python, aiokafka) from PyPI",
            Command::new(venv.join("bin/python"))
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "-r",
                ])
                .arg(&requirements_path),
        )?;
        std::fs::write(&stamp, &requirements)
            .map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    }
    Ok(venv)
}

/// The Maven project that pins the reference Apache Kafka release, and the suite that runs against it.
const KAFKA_POM: &str = "interop/kafka/pom.xml";
const KAFKA_SUITE: &str = "interop/tests";

/// The reference-Kafka suite: Apache Kafka brokers started from the pinned jars (`interop/kafka/kafka_node.py`)
/// and driven by pytest; `pytest_args` go to pytest after the suite's path. Its both-ways tests run the mirrorlog
/// binary too (`serve`, `dump`, `replay`), so it is built first (nothing to do after the real-client suite), and
/// its differential tests the `kafka-diff` driver.
fn kafka_suite(pytest_args: &[String]) -> Result<(), String> {
    ensure_java_and_maven()?;
    let libs = kafka_jars()?;
    let venv = client_venv()?;
    run(
        "cargo build -p mirrorlog",
        cargo().args(["build", "-p", "mirrorlog"]),
    )?;
    run(
        "cargo build -p mirror-link --example mirror_once",
        cargo().args(["build", "-p", "mirror-link", "--example", "mirror_once"]),
    )?;
    run(
        "cargo build -p kafka-diff",
        cargo().args(["build", "-p", "kafka-diff"]),
    )?;
    run(
        "reference-Kafka suite (pytest)",
        Command::new(venv.join("bin/python"))
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", KAFKA_SUITE])
            .args(pytest_args)
            .current_dir(workspace_root())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("MIRRORLOG_KAFKA_LIBS", &libs)
            .env("MIRRORLOG_BIN", target_dir().join("debug/mirrorlog"))
            .env(
                "MIRRORLOG_MIRROR_ONCE",
                target_dir().join("debug/examples/mirror_once"),
            )
            .env("MIRRORLOG_KAFKA_DIFF", target_dir().join("debug/kafka-diff")),
    )
}

/// The `java` the suite runs: `$JAVA_HOME/bin/java` when JAVA_HOME is set (Maven uses it too), else the `PATH`'s.
fn java() -> Command {
    match env::var_os("JAVA_HOME") {
        Some(home) => Command::new(Path::new(&home).join("bin/java")),
        None => Command::new("java"),
    }
}

/// The major version `java -version` reports (`"17.0.15"` is 17, `"1.8.0_402"` is 8), if Java runs at all.
fn java_major_version() -> Option<u32> {
    let out = java().arg("-version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stderr);
    let quoted = text.split('"').nth(1)?;
    let mut parts = quoted.split(['.', '_', '-', '+']);
    match parts.next()?.parse().ok()? {
        1 => parts.next()?.parse().ok(),
        major => Some(major),
    }
}

/// Kafka 4.x needs Java 17 or newer; Maven fetches its jars. Installs both with apt-get when possible, else
/// names the command to run.
fn ensure_java_and_maven() -> Result<(), String> {
    let java_ok = || java_major_version().is_some_and(|major| major >= 17);
    // javac: the real-client suite compiles its Java client (a JRE alone runs Kafka but cannot).
    let all_there = || java_ok() && on_path("javac") && on_path("mvn");
    if all_there() {
        return Ok(());
    }
    match java_major_version() {
        Some(major) if major < 17 => eprintln!("Java {major} found; Apache Kafka 4 needs Java 17 or newer"),
        Some(_) => {}
        None => {
            eprintln!("missing `java` (Apache Kafka 4 needs Java 17 or newer): package default-jdk-headless")
        }
    }
    if java_ok() && !on_path("javac") {
        eprintln!(
            "missing `javac` (compiles the real-client suite's Java client): package default-jdk-headless"
        );
    }
    if !on_path("mvn") {
        eprintln!("missing `mvn` (fetches Apache Kafka's jars from Maven Central): package maven");
    }
    // Debian's default JDK is 17 on bookworm and 21 on trixie.
    let install = "apt-get update && apt-get install -y default-jdk-headless maven";
    if is_root() && on_path("apt-get") {
        run("install Java and Maven", Command::new("sh").args(["-c", install]))?;
        if all_there() {
            return Ok(());
        }
        return Err(
            "Java 17 or newer and Maven are still missing after apt-get (with JAVA_HOME set, \
                    check that it names a JDK 17+)"
                .into(),
        );
    }
    Err(format!(
        "install Java 17 or newer and Maven first:\n    sudo sh -c '{install}'"
    ))
}

/// The `<tag>` value inside `text` (the first one), trimmed.
fn xml_value<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let start = text.find(&open)? + open.len();
    let end = start + text[start..].find(&format!("</{tag}>"))?;
    Some(text[start..end].trim())
}

/// The jars of the pinned Kafka release in `<target>/kafka-<version>/libs`, copied there by Maven (through the
/// local repository `<target>/maven-repo`) when missing or when the pom changed since (its contents are the
/// stamp, `<target>/kafka-<version>/pom.xml`).
fn kafka_jars() -> Result<PathBuf, String> {
    let pom_path = workspace_root().join(KAFKA_POM);
    let pom =
        std::fs::read_to_string(&pom_path).map_err(|e| format!("cannot read {}: {e}", pom_path.display()))?;
    let version = xml_value(&pom, "kafka.version")
        .ok_or_else(|| format!("{} sets no <kafka.version>", pom_path.display()))?;
    let home = target_dir().join(format!("kafka-{version}"));
    let libs = home.join("libs");
    let stamp = home.join("pom.xml");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(pom.as_str()) && libs.is_dir() {
        return Ok(libs);
    }
    let _ = std::fs::remove_dir_all(&libs);
    let started = std::time::Instant::now();
    eprintln!(
        "==> fetch Apache Kafka {version}'s jars from Maven Central into {}",
        libs.display()
    );
    // Maven's output is kept for a failure: even under -q, Debian's Maven 3.8 prints bare colour resets.
    let fetch = Command::new("mvn")
        .args(["-q", "-B", "-f"])
        .arg(&pom_path)
        .arg(format!(
            "-Dmaven.repo.local={}",
            target_dir().join("maven-repo").display()
        ))
        .arg("dependency:copy-dependencies")
        .arg("-DincludeScope=runtime")
        .arg(format!("-DoutputDirectory={}", libs.display()))
        .output()
        .map_err(|e| format!("cannot start mvn: {e}"))?;
    if !fetch.status.success() {
        return Err(format!(
            "fetching Apache Kafka's jars failed ({}):\n{}{}",
            fetch.status,
            String::from_utf8_lossy(&fetch.stdout),
            String::from_utf8_lossy(&fetch.stderr)
        ));
    }
    let (count, bytes) = std::fs::read_dir(&libs)
        .map_err(|e| format!("cannot read {}: {e}", libs.display()))?
        .flatten()
        .filter_map(|entry| entry.metadata().ok())
        .fold((0, 0), |(count, bytes), meta| (count + 1, bytes + meta.len()));
    eprintln!(
        "==> {count} jars, {:.0} MiB, in {:.0} s",
        bytes as f64 / (1024.0 * 1024.0),
        started.elapsed().as_secs_f64()
    );
    std::fs::write(&stamp, &pom).map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    Ok(libs)
}

fn target_dir() -> PathBuf {
    env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// The value following `flag` in `args`, if any.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|arg| arg == flag)
        .and_then(|index| args.get(index + 1))
        .map(String::as_str)
}

/// The directory a bench run writes to (`--out`, absolute: the steps run in different working directories).
fn bench_out(args: &[String]) -> PathBuf {
    let out = flag_value(args, "--out")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("bench-report"));
    std::path::absolute(&out).unwrap_or(out)
}

fn bench(args: &[String]) -> Result<(), String> {
    let publish = args.iter().any(|arg| arg == "--publish");
    if publish {
        // The published report stands for the whole benchmark: a partial or quick run, a comparison or the peer
        // section alone would replace it with less.
        let reducing = [
            "--only",
            "--backends",
            "--quick",
            "--tiny",
            "--failover-partitions",
            "--compare",
            "--peer-only",
        ];
        if let Some(partial) = reducing.into_iter().find(|flag| {
            args.iter()
                .any(|arg| arg == flag || arg.starts_with(&format!("{flag}=")))
        }) {
            return Err(format!(
                "--publish publishes a full run (every measurement, every backend, the peer section): it cannot \
                 go with {partial}"
            ));
        }
        if java_major_version().is_none_or(|major| major < 17) || !on_path("mvn") {
            return Err("--publish needs the peer section, which needs Java 17 or newer and Maven: `cargo xtask \
                        kafka` installs them as root (or: sudo apt-get install -y default-jdk-headless maven)"
                .into());
        }
    }
    if args.iter().any(|arg| arg == "--peer-only") {
        return peer_bench(args);
    }
    ensure_system_requirements()?;
    let report = |extra: &[String], features: &[&str]| {
        let mut command = cargo();
        command.args([
            "run",
            "--release",
            "-q",
            "-p",
            "storage-bench",
            "--bin",
            "bench-report",
        ]);
        if !features.is_empty() {
            command.arg("--features").arg(features.join(","));
        }
        command.arg("--").args(extra);
        command
    };
    if args.iter().any(|arg| arg == "--compare") {
        return run("bench-report --compare", &mut report(args, &[]));
    }
    let quick = args.iter().any(|arg| arg == "--quick");
    let backends = flag_value(args, "--backends").unwrap_or("fs,sled,rocks,memory");
    let rocks = backends.split(',').any(|name| name.trim() == "rocks");
    if rocks {
        let built = std::fs::read_dir(target_dir().join("release/build"))
            .map(|entries| {
                entries
                    .flatten()
                    .any(|entry| entry.file_name().to_string_lossy().starts_with("librocksdb-sys-"))
            })
            .unwrap_or(false);
        if !built {
            eprintln!(
                "==> the release build compiles RocksDB from source first: about 15–20 minutes on 2 cores (once; \
                 `--backends fs,sled,memory` skips it)"
            );
        }
    }
    // The micro-benchmark headlines (criterion), shorter under --quick.
    let timing: &[&str] = if quick {
        &["--warm-up-time", "1", "--measurement-time", "1"]
    } else {
        &["--warm-up-time", "2", "--measurement-time", "5"]
    };
    for (package, bench, filter) in [
        ("record-format", "codec", "validate|iterate_1000|encode_1000"),
        ("producer-state", "psm", "validated_appends"),
    ] {
        let mut command = cargo();
        command
            .args(["bench", "-q", "-p", package, "--bench", bench, "--", filter])
            .args(timing);
        run(&format!("criterion: {package} {bench}"), &mut command)?;
    }
    // Mirroring between two serve nodes through the administration API (issue 35): catch-up against a raw
    // loopback copy, failover of 1,000 partitions.
    let mut mirror_links = cargo();
    mirror_links.args(["bench", "-q", "-p", "broker", "--bench", "mirror_links"]);
    if quick {
        mirror_links.env("MIRRORLOG_BENCH_MIB", "64");
    }
    run("mirror links (broker/benches/mirror_links.rs)", &mut mirror_links)?;
    // `--publish` is this command's own: bench-report's takes a run and a directory.
    let out = bench_out(args);
    let mut extra: Vec<String> = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--publish" => {}
            "--out" => {
                rest.next();
            }
            _ => extra.push(arg.clone()),
        }
    }
    extra.extend(["--out".to_owned(), out.display().to_string()]);
    extra.extend([
        "--criterion".to_owned(),
        target_dir().join("criterion").display().to_string(),
    ]);
    let features: &[&str] = if rocks { &["rocks"] } else { &[] };
    run("bench-report", &mut report(&extra, features))?;
    // An earlier run's peer figures must not pass for this run's.
    let peer_json = out.join("peer.json");
    if let Err(error) = std::fs::remove_file(&peer_json) {
        if error.kind() != std::io::ErrorKind::NotFound {
            return Err(format!("cannot remove {}: {error}", peer_json.display()));
        }
    }
    peer_bench(args)?;
    if publish {
        let publish = [
            "--publish".to_owned(),
            out.display().to_string(),
            workspace_root().join("docs").display().to_string(),
        ];
        run("bench-report --publish (docs/)", &mut report(&publish, features))?;
    }
    Ok(())
}

/// The `peer` section of `cargo xtask bench` (alone with `--peer-only`): the same librdkafka load against Apache
/// Kafka and a release `mirrorlog serve` in one run (`interop/bench/peer_bench.py`), written to
/// `<out>/peer.md` and `peer.json`. Skipped, saying why, where Java 17+ or Maven is missing (`cargo xtask kafka`
/// installs them as root); `--quick` runs one short run.
fn peer_bench(args: &[String]) -> Result<(), String> {
    if java_major_version().is_none_or(|major| major < 17) || !on_path("mvn") {
        eprintln!(
            "==> peer: skipped — Apache Kafka needs Java 17 or newer and Maven (`cargo xtask kafka` installs them \
             as root, or: sudo apt-get install -y default-jdk-headless maven)"
        );
        return Ok(());
    }
    let libs = kafka_jars()?;
    let venv = client_venv()?;
    run(
        "cargo build --release -p mirrorlog",
        cargo().args(["build", "--release", "-p", "mirrorlog"]),
    )?;
    let out = bench_out(args);
    let mut command = Command::new(venv.join("bin/python"));
    command
        .arg(workspace_root().join("interop/bench/peer_bench.py"))
        .arg("--bin")
        .arg(target_dir().join("release/mirrorlog"))
        .arg("--libs")
        .arg(&libs)
        .arg("--out")
        .arg(&out)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    if args.iter().any(|arg| arg == "--quick") {
        command.args(["--messages", "20000", "--runs", "1"]);
    }
    run(
        "peer: Apache Kafka and mirrorlog serve under one load (interop/bench/peer_bench.py)",
        &mut command,
    )
}

fn fuzz(args: &[String]) -> Result<(), String> {
    let Some(target) = args.first() else {
        return Err("usage: cargo xtask fuzz <decode_batch|segment_reader|broker_request|fs_read_only_open> [seconds]".into());
    };
    let seconds: u64 = match args.get(1) {
        Some(text) => text
            .parse()
            .map_err(|_| format!("seconds must be a number, got {text}"))?,
        None => 60,
    };
    let has_cargo_fuzz = cargo()
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !has_cargo_fuzz {
        run(
            "cargo install cargo-fuzz",
            cargo().args(["install", "cargo-fuzz", "--locked"]),
        )?;
    }
    let corpus = workspace_root().join("fuzz/corpus").join(target);
    std::fs::create_dir_all(&corpus).map_err(|e| format!("cannot create {}: {e}", corpus.display()))?;
    let seeds = workspace_root().join("record-format/tests/data/kafka-batches");
    run(
        &format!("cargo +nightly fuzz run {target} for {seconds}s"),
        Command::new("cargo")
            .current_dir(workspace_root().join("fuzz"))
            .env_remove("CARGO_TARGET_DIR")
            .args(["+nightly", "fuzz", "run", target])
            .arg(&corpus)
            .arg(seeds.join("batches"))
            .arg(seeds.join("control"))
            .arg(seeds.join("segments"))
            .arg(seeds.join("corrupt"))
            .args(["--", &format!("-max_total_time={seconds}"), "-rss_limit_mb=2048"]),
    )
}

/// `cargo xtask model [...]`: the exhaustive model check of the mirror machine and the barrier rules (crate
/// `mirror-model`), built in release mode, with the given bounds (`cargo test` runs the CI bounds).
fn model(args: &[String]) -> Result<(), String> {
    run(
        "mirror model check",
        cargo()
            .args(["run", "--release", "-q", "-p", "mirror-model", "--"])
            .args(args),
    )
}

/// The power-loss sweeps a longer `cargo xtask crash` run shares its time among: (package, test target, test).
const CRASH_SWEEPS: &[(&str, &str, &str)] = &[(
    "storage-fs",
    "power_loss",
    "every_acknowledged_write_survives_power_loss_at_every_sampled_write",
)];

/// `cargo xtask crash [--minutes N]`: the power-loss sweeps for N minutes in all (release build), each printing how
/// many crash points it exercised.
fn crash(args: &[String]) -> Result<(), String> {
    let minutes: f64 = match flag_value(args, "--minutes") {
        Some(text) => text
            .parse()
            .ok()
            .filter(|m: &f64| m.is_finite() && *m > 0.0)
            .ok_or_else(|| format!("--minutes must be a positive number, got {text}"))?,
        None => 1.0,
    };
    let seconds = ((minutes * 60.0) / CRASH_SWEEPS.len() as f64).ceil() as u64;
    for (package, target, test) in CRASH_SWEEPS {
        run(
            &format!("power-loss sweep {package}::{test} for {seconds}s"),
            cargo()
                .env("MIRRORLOG_POWER_LOSS_SECONDS", seconds.to_string())
                .args([
                    "test",
                    "--release",
                    "-p",
                    package,
                    "--test",
                    target,
                    "--",
                    "--exact",
                    test,
                ])
                .args(["--nocapture"]),
        )?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => test(),
        Some("repo-checks") => check_repository(),
        Some("model") => model(&args[1..]),
        Some("clients") => client_suite(&args[1..]),
        Some("kafka") => kafka_suite(&args[1..]),
        Some("bench") => bench(&args[1..]),
        Some("fuzz") => fuzz(&args[1..]),
        Some("crash") => crash(&args[1..]),
        _ => Err("usage: cargo xtask <test | repo-checks | model [--topology T] [--depth N] [--source-writes N] [--local-writes N] [--crashes N] [--mutant M] | clients [pytest args] | kafka [pytest args] | bench [--quick] [--backends LIST] [--only ID]... [--out DIR] | bench --publish | bench --compare OLD.json NEW.json | fuzz <target> [seconds] | crash [--minutes N]>".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}
