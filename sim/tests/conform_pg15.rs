//! The model against a real PostgreSQL 15: every workload in `conform/` runs through
//! `handoff conform --against` on a server of its own (initdb with 1 MB segments into a
//! temporary directory, a unix socket only, `wal_level=logical`), and must show no
//! disagreement. The servers are stopped and their directories removed however the test ends.
//!
//! These tests need the Debian package `postgresql-15`. When its programs are missing they
//! install it with `apt-get` (as root, or through `sudo -n`); where that is impossible they fail,
//! saying so: they are never skipped.

use handoff_sim::conform::pgserver::{Options, PgCtl, TempServer};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Finds PostgreSQL 15's programs, installing the Debian package first if they are missing (once
/// per test process). An error says what is missing and what was tried.
fn postgres_15() -> Result<(), String> {
    static FOUND: OnceLock<Result<(), String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let Err(missing) = PgCtl::find() else { return Ok(()) };
            let root = Command::new("id").arg("-u").output().is_ok_and(|out| out.stdout.starts_with(b"0\n"));
            let apt = |args: &[&str]| {
                let mut command = if root { Command::new("apt-get") } else { Command::new("sudo") };
                if !root {
                    command.args(["-n", "apt-get"]);
                }
                command.args(args).env("DEBIAN_FRONTEND", "noninteractive").output()
            };
            eprintln!("conform_pg15: {missing}; installing the Debian package postgresql-15");
            let installed = apt(&["update", "-qq"])
                .and_then(|_| apt(&["install", "-y", "-qq", "postgresql-15"]))
                .map_err(|error| format!("{missing}; and apt-get could not run: {error}"))?;
            if !installed.status.success() {
                return Err(format!(
                    "{missing}; and `apt-get install postgresql-15` failed: {}",
                    String::from_utf8_lossy(&installed.stderr).trim()
                ));
            }
            PgCtl::find().map(|_| ())
        })
        .clone()
}

fn workloads() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conform");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "toml"))
        .collect();
    files.sort();
    files
}

/// A workload's disagreements and its text report, or why it could not run.
type Conformed = Result<(u64, String), String>;

/// Runs one workload against a fresh server.
fn conform(workload: &Path) -> Conformed {
    postgres_15()?;
    let server = TempServer::start(&Options { wal_segment_size_mb: 1, settings: Vec::new() })?;
    let output = Command::new(env!("CARGO_BIN_EXE_handoff"))
        .arg("conform")
        .arg(workload)
        .arg("--against")
        .arg(server.url("postgres"))
        .arg("--pgdata")
        .arg(server.data_dir())
        .output()
        .map_err(|error| format!("cannot run handoff: {error}"))?;
    let report = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let disagreements = report
        .lines()
        .filter_map(|line| line.strip_prefix("disagreements: "))
        .filter_map(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .next_back()
        .ok_or_else(|| {
            format!("{}: no disagreement count; stderr:\n{stderr}\nserver log:\n{}", workload.display(), server.log())
        })?;
    let expected_exit = if disagreements == 0 { 0 } else { 1 };
    if output.status.code() != Some(expected_exit) {
        return Err(format!("{}: {:?} with {disagreements} disagreements", workload.display(), output.status));
    }
    Ok((disagreements, report))
}

#[test]
fn the_conformance_suite_has_the_workloads_the_issue_asks_for() {
    let names: Vec<String> = workloads()
        .iter()
        .map(|path| path.file_stem().and_then(|stem| stem.to_str()).unwrap_or_default().to_string())
        .collect();
    for wanted in [
        "cap-exceeded-then-checkpoint",
        "extended-then-lost-at-a-volume-checkpoint",
        "rescue-by-advance",
        "active-slot-invalidated",
        "quiet-database-commits-only",
        "quiet-database-keepalive-confirmed",
        "heartbeats",
        "redelivery-after-fast-restart",
        "redelivery-after-immediate-restart",
        "peek-versus-get",
        "start-above-and-below-confirmed-flush",
        "open-transaction-in-another-database-holds-restart",
        "slot-creation-waits-for-running-transactions",
        "exported-snapshot-sees-what-the-wait-let-commit",
        "interleaved-commits-in-commit-order",
        "rolled-back-transaction-never-delivered",
        "transactional-and-non-transactional-messages",
        "repeatable-read-and-read-committed-reads",
        "rollback-in-another-database-releases-like-commit",
    ] {
        assert!(names.iter().any(|name| name == wanted), "conform/{wanted}.toml is missing");
    }
}

/// All workloads at once, each on its own server (they spend most of their time waiting for
/// the servers' background writers and in `sleep` steps).
#[test]
fn every_workload_agrees_with_postgresql_15() {
    let files = workloads();
    assert!(files.len() >= 10, "at least ten conformance workloads");
    let results: Vec<(PathBuf, Conformed)> = std::thread::scope(|scope| {
        let handles: Vec<_> = files.iter().map(|file| (file.clone(), scope.spawn(move || conform(file)))).collect();
        handles
            .into_iter()
            .map(|(file, handle)| (file, handle.join().unwrap_or_else(|_| Err("the run panicked".to_string()))))
            .collect()
    });
    let mut failures = Vec::new();
    for (file, result) in results {
        match result {
            Ok((0, _)) => {}
            Ok((disagreements, report)) => {
                failures.push(format!("{}: {disagreements} disagreements\n{report}", file.display()))
            }
            Err(error) => failures.push(error),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
