//! Seeds per second of a sweep (`handoff sweep`) over a bundled scenario.
//!
//! `cargo bench -p handoff-sim --bench sweep_throughput [-- SCENARIO [SEEDS [SAMPLES [JOBS]]]]`
//! (SCENARIO: a bundled scenario's name, or a path ending in `.toml`)
//!
//! Each sample sweeps `SEEDS` consecutive seeds on `JOBS` threads (default: the machine's
//! cores) as `handoff sweep` does, but in this process (`sweep::sweep`; the command runs the
//! same seeds in worker processes, see docs/performance.md); the report gives the median, minimum
//! and maximum seeds per second of the samples, and the process's peak resident memory.

#[cfg(not(madsim))]
fn main() {
    eprintln!("the benchmark needs the simulation: build with --cfg madsim (the workspace default)");
}

#[cfg(madsim)]
fn main() {
    use handoff_sim::scenario;
    use handoff_sim::sweep::{self, Sweep};
    use std::path::PathBuf;

    let args: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with("--")).collect();
    let name = args.first().map_or("claims-restart-during-snapshot", String::as_str);
    let seeds: u64 = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(2_000);
    let samples: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(5);
    let jobs: usize = args
        .get(3)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // A bundled scenario's name, or a path to a scenario file.
    let path = if name.ends_with(".toml") {
        PathBuf::from(name)
    } else {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("scenarios").join(format!("{name}.toml"))
    };
    let spec = match scenario::load(&path, &[]) {
        Ok(loaded) => loaded.spec,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(2);
        }
    };
    let rows: u32 = spec.tables.iter().map(|t| t.rows).sum();
    let mut rates = Vec::new();
    let mut findings = 0;
    for sample in 0..samples {
        let plan = Sweep {
            start: sample as u64 * seeds,
            seeds,
            jobs,
            shard: (1, 1),
            check_determinism: false,
            progress: false,
        };
        let summary = sweep::sweep(&spec, name, &[], &plan, |run| {
            if !run.findings.is_empty() {
                findings += 1;
            }
        });
        rates.push(summary.runs_per_second);
    }
    rates.sort_by(|a, b| a.total_cmp(b));
    println!("scenario            {name} ({rows} rows, fault profile: {})", spec.profile.is_some());
    println!("samples             {samples} x {seeds} seeds, {jobs} thread(s)");
    println!(
        "seeds/s             median {:.0}, min {:.0}, max {:.0}",
        rates[rates.len() / 2],
        rates[0],
        rates[rates.len() - 1]
    );
    println!("runs with findings  {findings}");
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        for line in status.lines().filter(|line| line.starts_with("VmHWM") || line.starts_with("VmRSS")) {
            println!("memory              {line}");
        }
    }
}
