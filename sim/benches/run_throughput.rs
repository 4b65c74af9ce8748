//! Runs per second of a bundled scenario under the timed lens, on one core.
//!
//! `cargo bench -p handoff-sim --bench run_throughput [-- SCENARIO [RUNS_PER_SAMPLE [SAMPLES]]]`
//!
//! Each sample runs `RUNS_PER_SAMPLE` consecutive seeds (each in a fresh madsim runtime, checks
//! and handoff record included); the report gives the median, minimum and maximum of the
//! samples. The wall clock is read only here, around whole runs, never inside one.

#[cfg(not(madsim))]
fn main() {
    eprintln!("the benchmark needs the simulation: build with --cfg madsim (the workspace default)");
}

#[cfg(madsim)]
fn main() {
    use handoff_sim::scenario;
    use handoff_sim::timed::runner;
    use std::path::PathBuf;
    use std::time::Instant;

    let args: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with("--")).collect();
    let name = args.first().map_or("claims-restart-during-snapshot", String::as_str);
    let runs: u64 = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(100);
    let samples: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(9);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("scenarios").join(format!("{name}.toml"));
    let loaded = scenario::load(&path, &[]).unwrap_or_else(|error| panic!("{error}"));
    let spec = loaded.spec;
    let rows: u32 = spec.tables.iter().map(|t| t.rows).sum();

    for seed in 0..10 {
        std::hint::black_box(runner::run(&spec, seed));
    }
    let mut rates = Vec::with_capacity(samples);
    let mut events = 0usize;
    for sample in 0..samples {
        let started = Instant::now();
        for seed in 0..runs {
            let result = runner::run(&spec, 1_000 + sample as u64 * runs + seed);
            events += result.trace.len();
            std::hint::black_box(result);
        }
        rates.push(runs as f64 / started.elapsed().as_secs_f64());
    }
    rates.sort_by(|a, b| a.total_cmp(b));
    let median = rates[rates.len() / 2];
    println!("scenario            {name} ({rows} rows)");
    println!("samples             {samples} x {runs} runs, one thread");
    println!("runs/s              median {median:.1}, min {:.1}, max {:.1}", rates[0], rates[rates.len() - 1]);
    println!("ms/run              median {:.3}", 1000.0 / median);
    println!("trace events/run    {:.0}", events as f64 / (samples as f64 * runs as f64));
}
