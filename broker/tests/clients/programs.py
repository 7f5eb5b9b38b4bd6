"""The suite's clients that are not Python: kafkajs (node/), Apache Kafka's Java client (java/) and franz-go (go/),
each a small program taking a scenario name and printing its result as one JSON object (see the programs' own
headers for their arguments).

They are built once per test session into `<target>/client-programs/` (`<target>` is `$CARGO_TARGET_DIR`, else
the repository's `target/`), from pinned versions:

- kafkajs: `npm ci` from node/package-lock.json, again only when the lock file changed (a copy of it is the
  stamp);
- Java: Maven compiles java/ and copies its runtime jars, through the local repository `<target>/maven-repo`
  (shared with the Kafka jars `cargo xtask kafka` fetches), again only when the pom or the source changed;
- franz-go: `go build` from go/go.mod and go.sum (Go's own cache makes an unchanged rebuild cheap);
- the Kafka Streams application (streams/): Maven, as the Java client, once per Streams release tested
  (`STREAMS_VERSIONS`); unlike the others it is a long-running process that prints a JSON object per line.

`cargo xtask clients` and `cargo xtask test` install the toolchains first; run by hand, a missing toolchain fails
the tests that need it with the command that installs it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parents[2]

# Building: npm ci and a cached Maven build take seconds, the first Maven or Go build with empty caches a minute.
BUILD_TIMEOUT_S = 600
# One scenario run: every step inside the programs has its own 30 s limit.
RUN_TIMEOUT_S = 120


class ProgramError(RuntimeError):
    """A build or a scenario run failed; the message carries the program's output."""


def target_dir() -> Path:
    value = os.environ.get("CARGO_TARGET_DIR")
    return Path(value) if value else REPOSITORY / "target"


def programs_dir() -> Path:
    return target_dir() / "client-programs"


def require_tool(name: str, install: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ProgramError(f"`{name}` is not on the PATH; install it with `{install}` (or run `cargo xtask clients`)")
    return path


def run_checked(command, what: str, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(
            [str(part) for part in command],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            **kwargs,
        )
    except subprocess.TimeoutExpired as expired:
        raise ProgramError(f"{what}: no result within {timeout:.0f}s\n--- stderr\n{expired.stderr}") from None
    if done.returncode != 0:
        raise ProgramError(
            f"{what} exited with {done.returncode}\n"
            f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
        )
    return done


def digest(paths) -> str:
    hasher = hashlib.sha256()
    for path in sorted(paths):
        hasher.update(str(path.relative_to(HERE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return hasher.hexdigest()


class Program:
    """A built client program: `run(scenario, *args)` returns its parsed JSON result."""

    def __init__(self, name: str, command: list, env: dict | None = None):
        self.name = name
        self.command = [str(part) for part in command]
        self.env = {**os.environ, **(env or {})}

    def run(self, *args, timeout: float = RUN_TIMEOUT_S):
        done = run_checked([*self.command, *args], f"{self.name} {' '.join(map(str, args))}", timeout, env=self.env)
        try:
            return json.loads(done.stdout)
        except json.JSONDecodeError as error:
            raise ProgramError(f"{self.name} printed no JSON ({error}):\n{done.stdout[-4000:]}") from None


def build_kafkajs() -> Program:
    """`npm ci` of node/package-lock.json into <programs>/kafkajs; the script runs from the repository with
    NODE_PATH pointing at the installed modules."""
    require_tool("node", "apt-get install -y nodejs npm")
    npm = require_tool("npm", "apt-get install -y nodejs npm")
    home = programs_dir() / "kafkajs"
    lock = (HERE / "node" / "package-lock.json").read_text(encoding="utf-8")
    stamp = home / "installed-from.package-lock.json"
    if not (stamp.exists() and stamp.read_text(encoding="utf-8") == lock):
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(HERE / "node" / name, home / name)
        run_checked([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], "npm ci (kafkajs)", BUILD_TIMEOUT_S,
                    cwd=home)
        stamp.write_text(lock, encoding="utf-8")
    return Program(
        "kafkajs", ["node", HERE / "node" / "scenarios.js"], env={"NODE_PATH": str(home / "node_modules")}
    )


def maven_build(project: Path, out: Path, what: str, properties: dict[str, str]) -> str:
    """Maven compiles `project` into `out` (classes/ and dependency/, `properties` passed as -D), skipped when the
    pom and the sources are those of the last build; returns the classpath of the result."""
    require_tool("java", "apt-get install -y default-jdk-headless maven")
    mvn = require_tool("mvn", "apt-get install -y default-jdk-headless maven")
    stamp = out / "built-from.sha256"
    sources = [project / "pom.xml", *sorted((project / "src").rglob("*.java"))]
    wanted = digest(sources)
    if not (stamp.exists() and stamp.read_text(encoding="ascii") == wanted):
        shutil.rmtree(out, ignore_errors=True)
        run_checked(
            [
                mvn, "-q", "-B", "-f", project / "pom.xml",
                f"-Dmaven.repo.local={target_dir() / 'maven-repo'}",
                *(f"-D{key}={value}" for key, value in properties.items()),
                "compile", "dependency:copy-dependencies",
            ],
            f"mvn compile ({what})",
            BUILD_TIMEOUT_S,
        )
        stamp.write_text(wanted, encoding="ascii")
    return f"{out / 'classes'}{os.pathsep}{out / 'dependency' / '*'}"


def java_binary() -> str:
    return str(Path(os.environ["JAVA_HOME"]) / "bin" / "java") if os.environ.get("JAVA_HOME") else "java"


def build_java_client() -> Program:
    """Maven compiles java/ into <programs>/java."""
    out = programs_dir() / "java"
    classpath = maven_build(HERE / "java", out, "Java client", {"clients.build.dir": out})
    return Program(
        "java",
        [
            java_binary(),
            # Short-lived client programs start faster with the client compiler alone.
            "-XX:TieredStopAtLevel=1",
            "-Xmx256m",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            classpath,
            "dev.mirrorlog.clients.ClientScenarios",
        ],
    )


# The Kafka Streams releases the Streams tests run: the one the issue asks for (4.x, with KAFKA-16699's fix) and the
# last release before the fix (3.7.x), side by side.
STREAMS_VERSIONS = {"4": "4.1.2", "3.7": "3.7.2"}


def build_streams_app(version: str) -> list[str]:
    """Maven compiles streams/ against kafka-streams `version` into <programs>/streams-<version>; returns the
    command that starts the WordCount application (its arguments follow)."""
    out = programs_dir() / f"streams-{version}"
    classpath = maven_build(
        HERE / "streams",
        out,
        f"Kafka Streams {version} application",
        {"streams.build.dir": out, "kafka.streams.version": version},
    )
    return [
        java_binary(),
        "-Xmx256m",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        classpath,
        "dev.mirrorlog.streams.WordCount",
    ]


def build_franz_go() -> Program:
    """`go build` of go/ into <programs>/franz-go/franzgo."""
    go = require_tool("go", "apt-get install -y golang-go")
    binary = programs_dir() / "franz-go" / "franzgo"
    binary.parent.mkdir(parents=True, exist_ok=True)
    run_checked([go, "build", "-mod=readonly", "-o", binary, "."], "go build (franz-go)", BUILD_TIMEOUT_S,
                cwd=HERE / "go")
    return Program("franz-go", [binary])
