//! Unique states per second of `handoff check` (the exhaustive lens) on a scenario's bound.
//!
//! `cargo bench -p handoff-sim --bench check_throughput [-- SCENARIO [SAMPLES [THREADS [dfs|bfs [PATH=VALUE...]]]]]`
//! (SCENARIO: a bundled scenario's name, a zoo entry as `zoo/NAME`, or a path ending in `.toml`;
//! every further argument is a `--set`, e.g. `check.crashes=2`)
//!
//! Each sample explores the whole bound as `handoff check` does, without the counterexample's
//! search and story; the report gives the median, minimum and maximum unique states per second
//! and of the exploration's seconds, and the process's peak resident memory. Like the `handoff`
//! binary, the benchmark allocates with mimalloc.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    use handoff_sim::exhaustive::check::{self, Strategy};
    use handoff_sim::scenario;
    use std::path::PathBuf;

    let args: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with("--")).collect();
    let name = args.first().map_or("claims-restart-during-snapshot", String::as_str);
    let samples: usize = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(5);
    let threads: usize = args
        .get(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let strategy = match args.get(3).map(String::as_str) {
        Some("bfs") => Strategy::Bfs,
        _ => Strategy::Dfs,
    };
    let sets: Vec<String> = args.iter().skip(4).cloned().collect();
    let path = if name.ends_with(".toml") {
        PathBuf::from(name)
    } else {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("scenarios").join(format!("{name}.toml"))
    };
    let spec = match scenario::load(&path, &sets) {
        Ok(loaded) => loaded.spec,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(2);
        }
    };
    // The memory budget `handoff check` keeps by default, so that its watchdog runs as it does
    // in the command.
    let max_memory_bytes = handoff_sim::exhaustive::budget::default_max_memory();
    let plan = check::CheckPlan {
        strategy,
        max_depth: None,
        threads,
        timeout: None,
        max_states: usize::MAX,
        max_memory_bytes,
    };
    let mut rates = Vec::new();
    let mut seconds = Vec::new();
    let mut size = (0, 0);
    for _ in 0..samples {
        let report = match check::explore(&spec, name, plan) {
            Ok(report) => report,
            Err(error) => {
                eprintln!("error: {error}");
                std::process::exit(2);
            }
        };
        size = (report.states, report.unique_states);
        rates.push(report.unique_states_per_second);
        seconds.push(report.seconds);
    }
    rates.sort_by(|a, b| a.total_cmp(b));
    seconds.sort_by(|a, b| a.total_cmp(b));
    let strategy = if strategy == Strategy::Bfs { "bfs" } else { "dfs" };
    println!("scenario        {name} {}", sets.join(" "));
    println!("bound           {} generated, {} unique", size.0, size.1);
    println!("samples         {samples}, {strategy}, {threads} thread(s)");
    let median = |v: &[f64]| v[v.len() / 2];
    println!("unique states/s median {:.0}, min {:.0}, max {:.0}", median(&rates), rates[0], rates[rates.len() - 1]);
    println!(
        "seconds         median {:.2}, min {:.2}, max {:.2}",
        median(&seconds),
        seconds[0],
        seconds[seconds.len() - 1]
    );
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        for line in status.lines().filter(|line| line.starts_with("VmHWM")) {
            println!("memory          {line}");
        }
    }
}
