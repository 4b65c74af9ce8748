//! Crash isolation: `handoff sweep` runs its seeds in worker processes, so that a run that dies
//! (a segmentation fault, an abort, a panic) or never ends costs its seed, not the sweep.
//!
//! Each of a sweep's jobs owns one worker, started once: the `handoff` binary itself, as
//! `handoff sweep-worker SCENARIO [--set PATH=VALUE]... [--save DIR]` (a subcommand hidden from
//! `--help`). They talk in lines, on the worker's standard input and output:
//!
//! - the worker loads the scenario with the same `--set`s and says `ready FINGERPRINT`, a hash of
//!   the scenario it loaded; the supervisor compares it with its own, so a file edited during a
//!   sweep stops the sweep instead of mixing two scenarios in one report;
//! - `SEED` asks for one run: the answer is its [`SeedRun`] as one JSON line;
//! - `save SEED` asks for the run kept whole and pinned as a regression scenario in DIR
//!   (`--save`): the answer is `saved` or `error MESSAGE`;
//! - the end of the input ends the worker (exit 0).
//!
//! A worker answers its requests in the order asked, and is asked a few seeds ahead (more when runs
//! are short, see [`Pace`]) so that it never waits for its next seed. Lines the worker writes that
//! are not answers are passed on to standard error, and the worker's standard error is the
//! supervisor's. When the worker's output ends before an answer, the worker died running the oldest
//! request not answered: its exit status names how ([`CrashCause`]: a signal and its name, or an
//! exit code), that seed is reported as crashed with the command that replays it, and a new worker
//! is asked the requests after it. A request that takes longer than `run_timeout` (`--run-timeout`,
//! a last defence against a run that never ends; it counts from when the worker begins the request)
//! has its worker killed and is reported as timed out.
//!
//! Test hooks (for tests of this module; they cost nothing else): a worker started with
//! `HANDOFF_TEST_CRASH_SEED=5` in its environment raises SIGSEGV when asked for seed 5, and one with
//! `HANDOFF_TEST_HANG_SEED=7` sleeps for ever when asked for seed 7 (both take a comma-separated
//! list of seeds).

use crate::sweep::regressions;
use crate::sweep::{Crash, CrashCause, RunSeed, SeedOutcome, SeedRun, Summary, replay_command};
use crate::timed::runner::{self, RunOptions};
use handoff_models::scenario::spec::Spec;
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How `handoff sweep` starts its workers.
#[derive(Clone, Debug)]
pub struct Workers {
    /// The `handoff` binary (the running one).
    pub program: PathBuf,
    /// The scenario file, which each worker loads.
    pub scenario: PathBuf,
    /// A worker that has not answered a request after this long is killed; its seed is reported
    /// as timed out.
    pub run_timeout: Duration,
}

/// The subcommand a worker is started with.
pub const WORKER_COMMAND: &str = "sweep-worker";
/// Test hook: seeds on which a worker raises SIGSEGV.
pub const TEST_CRASH_SEED: &str = "HANDOFF_TEST_CRASH_SEED";
/// Test hook: seeds on which a worker sleeps for ever.
pub const TEST_HANG_SEED: &str = "HANDOFF_TEST_HANG_SEED";

/// A hash of a loaded scenario; the same in every process of one `handoff` binary.
pub fn fingerprint(spec: &Spec) -> String {
    // `DefaultHasher::new()` has fixed keys: the same binary hashes the same way in every process.
    let mut hasher = std::hash::DefaultHasher::new();
    spec.hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

/// The worker's side: answers requests from `input` on `output` until `input` ends. `scenario` is
/// the name the sweep gives the scenario (for pinned regressions); `save` is `--save`'s directory.
/// A closed `output` (the supervisor is gone) ends the worker quietly.
pub fn serve(
    spec: &Spec,
    scenario: &str,
    save: Option<&Path>,
    input: impl BufRead,
    mut output: impl Write,
) -> Result<(), String> {
    die_with_supervisor();
    let crash_seeds = test_hook_seeds(TEST_CRASH_SEED)?;
    let hang_seeds = test_hook_seeds(TEST_HANG_SEED)?;
    let hooks = |seed: u64| {
        if crash_seeds.contains(&seed) {
            crash_for_test();
        }
        if hang_seeds.contains(&seed) {
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
    };
    let mut say = |line: &str| writeln!(output, "{line}").and_then(|()| output.flush()).is_ok();
    if !say(&format!("ready {}", fingerprint(spec))) {
        return Ok(());
    }
    for (index, line) in input.lines().enumerate() {
        let line = line.map_err(|error| format!("sweep-worker: cannot read request {}: {error}", index + 1))?;
        let request = line.trim();
        let answer = if let Some(seed) = request.strip_prefix("save ") {
            let seed = parse_seed(seed, index)?;
            let dir = save.ok_or("sweep-worker: asked to save a seed, but started without --save")?;
            hooks(seed);
            match regressions::save_seed(spec, scenario, seed, dir) {
                Ok(_) => "saved".to_string(),
                Err(error) => format!("error {}", error.replace('\n', " ")),
            }
        } else {
            let seed = parse_seed(request, index)?;
            hooks(seed);
            let result = runner::run_with(spec, seed, RunOptions::SWEEP);
            serde_json::to_string(&SeedRun::from(spec, &result)).expect("a run serialises")
        };
        if !say(&answer) {
            return Ok(());
        }
    }
    Ok(())
}

/// A worker whose supervisor is killed (so that nobody will read its answers, nor kill it at the
/// run timeout) is killed too, on Linux; elsewhere it ends at its next answer.
fn die_with_supervisor() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
}

fn parse_seed(text: &str, index: usize) -> Result<u64, String> {
    text.parse().map_err(|_| format!("sweep-worker: request {}: `{text}` is not a seed", index + 1))
}

/// A test hook's seeds, from its environment variable (none when it is unset).
fn test_hook_seeds(variable: &str) -> Result<Vec<u64>, String> {
    let Ok(text) = std::env::var(variable) else { return Ok(Vec::new()) };
    text.split(',')
        .map(|seed| {
            seed.trim().parse().map_err(|_| format!("{variable}={text}: expected seeds separated by commas, e.g. 5,8"))
        })
        .collect()
}

/// The crash test hook: dies of SIGSEGV, as the runs that crash do.
#[cfg(unix)]
fn crash_for_test() -> ! {
    // SAFETY: `signal` and `raise` have no memory-safety preconditions. The default action is
    // restored first: the standard library's own SIGSEGV handler (for stack overflows) would
    // return from a raised signal instead of ending the process.
    unsafe {
        libc::signal(libc::SIGSEGV, libc::SIG_DFL);
        libc::raise(libc::SIGSEGV);
    }
    std::process::abort()
}

#[cfg(not(unix))]
fn crash_for_test() -> ! {
    std::process::abort()
}

/// The supervisor's side of one job: a worker, started when needed and again after it dies, and
/// the requests it was asked and has not answered yet, in order.
pub(crate) struct Job<'a> {
    workers: &'a Workers,
    scenario: &'a str,
    /// The command-line arguments that load the sweep's scenario ([`crate::sweep::choice_args`]).
    args: &'a [String],
    fingerprint: &'a str,
    save: Option<&'a Path>,
    worker: Option<Worker>,
    asked: VecDeque<Request>,
    pace: Pace,
}

/// How fast a job's runs answer, to ask far enough ahead and read answers in batches.
///
/// A worker's answer wakes a supervisor thread that waits for it, and that wake-up (a switch away
/// from a worker, on a machine whose cores all run workers) costs a few percent of a short run.
/// When runs are shorter than [`BATCH_WINDOW`], the job keeps several windows' worth of seeds
/// asked and sleeps through a window before it reads, so that the answers of a window are read at
/// one wake-up; the worker, with seeds queued, never waits (docs/performance.md has the numbers).
/// The times are wall-clock times of the supervisor, outside every simulated run.
#[derive(Default)]
struct Pace {
    started: Option<Instant>,
    answered: u32,
}

/// See [`Pace`].
const BATCH_WINDOW: Duration = Duration::from_millis(20);

impl Pace {
    /// The mean time between answers so far, once there are enough of them to tell.
    fn run_time(&self) -> Option<Duration> {
        (self.answered >= 8).then(|| self.started.map(|started| started.elapsed() / self.answered)).flatten()
    }

    /// Seeds to keep asked: two (one running, one waiting), or, for short runs, four windows'
    /// worth (a sleep can overrun its window on a busy machine, and the worker must not run dry).
    fn in_flight(&self) -> usize {
        match self.run_time() {
            Some(run) if run < BATCH_WINDOW => {
                (4.0 * BATCH_WINDOW.as_secs_f64() / run.as_secs_f64().max(1e-6)).ceil().min(126.0) as usize + 2
            }
            _ => 2,
        }
    }

    /// Whether to sleep through a window before waiting for an answer, with `asked` requests not
    /// answered: only when runs are short and enough are asked to last two windows (so neither the
    /// worker runs dry nor, at the end of a sweep, the last answers wait out a window).
    fn batch(&self, asked: usize) -> Option<Duration> {
        self.run_time()
            .filter(|run| *run < BATCH_WINDOW && *run * u32::try_from(asked).unwrap_or(u32::MAX) >= 2 * BATCH_WINDOW)
            .map(|_| BATCH_WINDOW)
    }
}

/// A request to a worker.
struct Request {
    seed: u64,
    text: String,
}

impl<'a> Job<'a> {
    /// A job whose worker is started at once (so a worker that cannot start stops the sweep
    /// before it runs anything).
    pub(crate) fn start(
        workers: &'a Workers,
        scenario: &'a str,
        args: &'a [String],
        fingerprint: &'a str,
    ) -> Result<Job<'a>, String> {
        let mut job = Job {
            workers,
            scenario,
            args,
            fingerprint,
            save: None,
            worker: None,
            asked: VecDeque::new(),
            pace: Pace::default(),
        };
        job.worker = Some(job.start_worker()?);
        Ok(job)
    }

    fn start_worker(&self) -> Result<Worker, String> {
        Worker::start(self.workers, self.args, self.save, self.fingerprint)
    }

    /// A new worker, asked again what the last one left unanswered. A worker that stops reading
    /// while they are written died running one of them (the first can crash it before the last is
    /// written): its answer, read next, says so, and the ones after it go to the worker after it,
    /// as in [`Job::ask`].
    fn restart(&mut self) -> Result<(), String> {
        self.worker = None;
        let mut worker = self.start_worker()?;
        for request in &self.asked {
            if worker.send(&request.text).is_err() {
                break;
            }
        }
        self.worker = Some(worker);
        Ok(())
    }

    fn crash(&self, seed: u64, cause: CrashCause) -> Crash {
        Crash { seed, cause, replay: replay_command(self.scenario, self.args, seed) }
    }

    /// Sends a request; its answer comes from [`Job::answer`] once the ones asked before it are in.
    fn ask(&mut self, seed: u64, text: String) -> Result<(), String> {
        let first = self.asked.is_empty();
        self.asked.push_back(Request { seed, text });
        let sent = match &mut self.worker {
            Some(worker) => worker.send(&self.asked[self.asked.len() - 1].text).is_ok(),
            None => false,
        };
        // A worker that cannot be written to died: running an earlier request (its answer will say
        // so), or idle, between two requests, when this is the only one: not its doing.
        if !sent && first { self.restart() } else { Ok(()) }
    }

    /// The answer to the oldest request (a line `is_answer` accepts), or how its worker ended; a
    /// new worker is then asked the requests after it.
    fn answer(&mut self, is_answer: fn(&str) -> bool) -> Result<(u64, Answer), String> {
        let more = self.asked.len() > 1;
        let batch = self.pace.batch(self.asked.len());
        let answer = match &mut self.worker {
            Some(worker) => worker.answer(is_answer, more, batch)?,
            None => return Err("a worker process was asked for an answer it was never asked".to_string()),
        };
        self.pace.started.get_or_insert_with(Instant::now);
        self.pace.answered = self.pace.answered.saturating_add(1);
        let request = self.asked.pop_front().ok_or("an answer from a worker process that was asked nothing")?;
        if let Answer::Ended(_) = answer {
            self.worker = None;
            if !self.asked.is_empty() {
                self.restart()?;
            }
        }
        Ok((request.seed, answer))
    }
}

impl RunSeed for Job<'_> {
    fn ask(&mut self, seed: u64) -> Result<(), String> {
        Job::ask(self, seed, seed.to_string())
    }

    fn outcome(&mut self) -> Result<SeedOutcome, String> {
        match self.answer(|line| line.starts_with('{'))? {
            (seed, Answer::Line(line)) => {
                let run: SeedRun = serde_json::from_str(&line)
                    .map_err(|error| format!("a worker process answered seed {seed} with no run: {error}: {line}"))?;
                if run.seed != seed {
                    return Err(format!("a worker process answered seed {seed} with a run of seed {}", run.seed));
                }
                Ok(SeedOutcome::Ran(run))
            }
            (seed, Answer::Ended(cause)) => Ok(SeedOutcome::Crashed(self.crash(seed, cause))),
        }
    }

    fn in_flight(&self) -> usize {
        self.pace.in_flight()
    }
}

/// `sweep --save DIR` through a worker: each seed [`regressions::first_failure_seeds`] names is
/// run again whole and pinned into `dir`, and `saved` sees each file written. A run that crashes
/// its worker, or a file that cannot be written, stops it with an error.
pub fn save_first_failures(
    workers: &Workers,
    spec: &Spec,
    scenario: &str,
    sets: &[String],
    summary: &Summary,
    dir: &Path,
    mut saved: impl FnMut(&Path),
) -> Result<(), String> {
    let seeds = regressions::first_failure_seeds(summary);
    if seeds.is_empty() {
        return Ok(());
    }
    let fingerprint = fingerprint(spec);
    let args = crate::sweep::choice_args(&spec.prediction, sets);
    let mut job = Job {
        workers,
        scenario,
        args: &args,
        fingerprint: &fingerprint,
        save: Some(dir),
        worker: None,
        asked: VecDeque::new(),
        pace: Pace::default(),
    };
    for seed in seeds {
        job.ask(seed, format!("save {seed}"))?;
        match job.answer(|line| line == "saved" || line.starts_with("error "))?.1 {
            Answer::Line(line) if line == "saved" => saved(&dir.join(regressions::file_name(spec, seed))),
            Answer::Line(line) => return Err(line.trim_start_matches("error ").to_string()),
            Answer::Ended(cause) => {
                let crash = job.crash(seed, cause);
                return Err(format!(
                    "--save: seed {seed} could not be saved: the process running it again whole ended ({}); replay: {}",
                    crash.cause, crash.replay
                ));
            }
        }
    }
    Ok(())
}

/// What came of a request.
enum Answer {
    Line(String),
    /// The worker ended without answering (it is reaped; start another).
    Ended(CrashCause),
}

/// One worker process. Its answers are read on the job's own thread; a watchdog thread of its own,
/// asleep but for about one wake-up per `run_timeout`, kills it when a request takes too long.
struct Worker {
    watched: Arc<(Mutex<Watched>, Condvar)>,
    /// Closed first when the worker is dropped.
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    watchdog: Option<std::thread::JoinHandle<()>>,
    run_timeout: Duration,
}

/// What the job and the watchdog share. Nothing is notified per request: the watchdog sleeps
/// until the deadline it last saw, and finds it moved on (or the request answered) when it wakes.
struct Watched {
    child: Child,
    /// When the request under way, if any, runs out of time.
    deadline: Instant,
    asked: bool,
    /// The watchdog killed the worker.
    timed_out: bool,
    /// The worker is being dropped: the watchdog ends.
    done: bool,
}

impl Worker {
    fn start(workers: &Workers, args: &[String], save: Option<&Path>, fingerprint: &str) -> Result<Worker, String> {
        let mut command = Command::new(&workers.program);
        #[cfg(unix)]
        std::os::unix::process::CommandExt::arg0(&mut command, "handoff");
        command.arg(WORKER_COMMAND).arg(&workers.scenario);
        for pair in args.chunks(2) {
            // `--flag=VALUE`, one argument each, so that no value is taken for a flag.
            command.arg(pair.join("="));
        }
        if let Some(dir) = save {
            command.arg("--save").arg(dir);
        }
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        let mut child = command
            .spawn()
            .map_err(|error| format!("cannot start a worker process ({}): {error}", workers.program.display()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("a worker process was started without its pipes".to_string());
        };
        let run_timeout = workers.run_timeout;
        let watched = Arc::new((
            Mutex::new(Watched { child, deadline: Instant::now(), asked: false, timed_out: false, done: false }),
            Condvar::new(),
        ));
        let watchdog = {
            let watched = Arc::clone(&watched);
            std::thread::spawn(move || watch(&watched, run_timeout))
        };
        let mut worker = Worker {
            watched,
            stdin: Some(stdin),
            // Room for the answers of a batch window (a run's line is about 400 bytes).
            stdout: BufReader::with_capacity(1 << 16, stdout),
            watchdog: Some(watchdog),
            run_timeout,
        };
        // Loading the scenario is a request too, with the same time limit.
        {
            let mut watched = worker.watched();
            watched.deadline = Instant::now() + run_timeout;
            watched.asked = true;
        }
        let expected = format!("ready {fingerprint}");
        match worker.answer(|line| line.starts_with("ready "), false, None)? {
            Answer::Line(line) if line == expected => Ok(worker),
            Answer::Line(_) => Err(format!(
                "{}: the scenario changed during the sweep (a new worker process loaded another one than the sweep \
                 began with); sweep it again",
                workers.scenario.display()
            )),
            Answer::Ended(cause) => Err(format!("a worker process could not start ({cause})")),
        }
    }

    fn watched(&self) -> MutexGuard<'_, Watched> {
        // A poisoned lock means the watchdog panicked: what it guards is still consistent.
        self.watched.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends a request. The deadline runs from now if the worker was idle; otherwise from when it
    /// answers the request before.
    fn send(&mut self, request: &str) -> std::io::Result<()> {
        {
            let mut watched = self.watched();
            if !watched.asked {
                watched.deadline = Instant::now() + self.run_timeout;
                watched.asked = true;
            }
        }
        let stdin = self.stdin.as_mut().ok_or(std::io::ErrorKind::BrokenPipe)?;
        // One write per request (the pipe is not buffered).
        stdin.write_all(format!("{request}\n").as_bytes())
    }

    /// The next line `is_answer` accepts (others are passed on to standard error), or how the
    /// worker ended: its output closed (it died, or the watchdog killed it). With `more` requests
    /// sent, the next one's time starts. With a `batch` window, and no answer read yet, it first
    /// sleeps through the window (see [`Pace`]).
    fn answer(&mut self, is_answer: fn(&str) -> bool, more: bool, batch: Option<Duration>) -> Result<Answer, String> {
        let mut line = String::new();
        loop {
            line.clear();
            if let Some(window) = batch
                && self.stdout.buffer().is_empty()
            {
                std::thread::sleep(window);
            }
            match self.stdout.read_line(&mut line) {
                Ok(0) | Err(_) => return self.ended().map(Answer::Ended),
                Ok(_) => {
                    let text = line.trim_end_matches(['\n', '\r']);
                    if is_answer(text) {
                        let mut watched = self.watched();
                        if more {
                            watched.deadline = Instant::now() + self.run_timeout;
                        } else {
                            watched.asked = false;
                        }
                        return Ok(Answer::Line(text.to_string()));
                    }
                    let _ = writeln!(std::io::stderr(), "{text}");
                }
            }
        }
    }

    /// How the worker ended, once its output has closed. A process closes its output as it exits,
    /// a moment before its status can be collected; one that closed it and lives on is killed.
    fn ended(&mut self) -> Result<CrashCause, String> {
        let collect = |error: std::io::Error| format!("cannot collect a worker process that ended: {error}");
        let grace = Instant::now() + Duration::from_secs(5);
        loop {
            let mut watched = self.watched();
            if let Some(status) = watched.child.try_wait().map_err(collect)? {
                watched.asked = false;
                return Ok(if watched.timed_out {
                    CrashCause::TimedOut { timeout_s: self.run_timeout.as_secs() }
                } else {
                    cause(status)
                });
            }
            if Instant::now() >= grace {
                let _ = watched.child.kill();
                let status = watched.child.wait().map_err(collect)?;
                watched.asked = false;
                return Ok(cause(status));
            }
            drop(watched);
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The watchdog of one worker: kills it when a request is still unanswered at its deadline.
fn watch(watched: &(Mutex<Watched>, Condvar), run_timeout: Duration) {
    let (lock, wake) = watched;
    let mut state = lock.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if state.done {
            return;
        }
        // The watchdog is outside every simulated run: it only bounds how long a worker may take.
        let now = Instant::now();
        let sleep = if state.asked && now >= state.deadline {
            let _ = state.child.kill();
            state.timed_out = true;
            state.asked = false;
            run_timeout
        } else if state.asked {
            state.deadline - now
        } else {
            // Idle: a request asked from now on has its deadline after this wake-up.
            run_timeout
        };
        state = wake.wait_timeout(state, sleep).unwrap_or_else(PoisonError::into_inner).0;
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // An idle worker (or one already reaped) has nothing to lose.
        drop(self.stdin.take());
        {
            let mut watched = self.watched();
            watched.done = true;
            let _ = watched.child.kill();
            let _ = watched.child.wait();
        }
        self.watched.1.notify_all();
        if let Some(watchdog) = self.watchdog.take() {
            let _ = watchdog.join();
        }
    }
}

/// How a process that did not answer ended.
fn cause(status: ExitStatus) -> CrashCause {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return CrashCause::Signal { signal, signal_name: signal_name(signal) };
        }
    }
    // Without a signal, a process that ended has an exit code.
    CrashCause::Exit { exit_code: status.code().unwrap_or(i32::MIN) }
}

/// The name of a signal, on this platform.
#[cfg(unix)]
fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGSYS => "SIGSYS",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => "an unnamed signal",
    };
    name.to_string()
}
