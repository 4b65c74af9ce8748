//! `cargo xtask`: the project's checks that are not unit tests (docs/miscompilation.md,
//! docs/memory-safety.md).
//!
//! - `cargo xtask ir-scan`: builds the release binary with its LLVM IR kept and looks for the
//!   shape LLVM miscompiles (a select of two loads on a possibly uninitialised `trunc nuw`
//!   condition). Exits 1 when a workspace crate has one; dependencies' sites are listed.
//! - `cargo xtask miscompile-repro`: builds `xtask/repro/select_of_loads.rs` with this toolchain's
//!   `rustc -O` and says whether it still crashes.
//! - `cargo xtask valgrind-sweep`: runs sweeps of the bundled scenarios with every fault kind on
//!   under valgrind's memcheck and requires zero errors.

/// `println!` that ends quietly on a closed output (`cargo xtask ir-scan | head`) instead of
/// panicking.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod ir_scan;
mod valgrind;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const USAGE: &str = "usage: cargo xtask <command>

commands:
  ir-scan [FILE.ll]  build the release binary keeping its LLVM IR (or read FILE.ll); fail on the
                     miscompiled shape
  miscompile-repro   build and run the stand-alone reproducer with this toolchain
  valgrind-sweep     sweeps of every bundled scenario, all fault kinds, under valgrind
                     [--seeds N (default 100)] [--jobs J] [--scenario FILE]... [--build]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ir-scan") => ir_scan_command(&args[1..]),
        Some("miscompile-repro") if args.len() == 1 => repro_command(),
        Some("valgrind-sweep") => valgrind::command(&args[1..]),
        Some("-h" | "--help" | "help") => {
            say!("{USAGE}");
            Ok(true)
        }
        _ => Err(format!("{USAGE}\n")),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            {
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "xtask: {error}");
            }
            ExitCode::from(2)
        }
    }
}

/// The workspace's root (this crate's parent).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

fn run(command: &mut Command) -> Result<(), String> {
    let status = command.status().map_err(|error| format!("cannot run {command:?}: {error}"))?;
    if status.success() { Ok(()) } else { Err(format!("{command:?} failed: {status}")) }
}

/// The crates of this workspace, as their IR files are named.
const OWN_CRATES: [&str; 3] = ["handoff_models", "handoff_sim", "handoff"];

/// `ir-scan`: builds and scans; `ir-scan FILE.ll...`: scans those files only, each as one of this
/// workspace's crates (to read another build's IR).
fn ir_scan_command(files: &[String]) -> Result<bool, String> {
    if !files.is_empty() {
        let files: Vec<(String, PathBuf)> =
            files.iter().map(|file| (OWN_CRATES[0].to_owned(), PathBuf::from(file))).collect();
        return report_scan(&files);
    }
    let root = root();
    let target = root.join("target/ir-scan");
    // The release profile as users build it (`--cfg madsim` is what .cargo/config.toml sets;
    // RUSTFLAGS replaces that setting, so it is repeated here), every crate's IR kept.
    run(cargo()
        .current_dir(&root)
        .env("RUSTFLAGS", "--cfg madsim --emit=llvm-ir,link")
        .args(["build", "--release", "--package", "handoff-sim", "--bin", "handoff", "--target-dir"])
        .arg(&target))?;
    let deps = target.join("release/deps");
    let files = ir_files(&deps)?;
    if !OWN_CRATES.iter().all(|own| files.iter().any(|(name, _)| name == own)) {
        return Err(format!("the build left no IR of this workspace's crates in {}", deps.display()));
    }
    report_scan(&files)
}

/// Scans IR files, prints every hazard and a summary; whether this workspace's crates have none.
fn report_scan(files: &[(String, PathBuf)]) -> Result<bool, String> {
    let (mut own_hazards, mut dependency_hazards, mut functions, mut selects) = (0, 0, 0, 0);
    let (mut guarded, mut two_objects) = (0, 0);
    for (name, path) in files {
        let text = std::fs::read_to_string(path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        let scan = ir_scan::scan(&text);
        functions += scan.functions;
        selects += scan.selects_of_loads;
        guarded += scan.sites.iter().filter(|site| site.noundef).count();
        two_objects += scan.sites.iter().filter(|site| !site.noundef && !site.same_object).count();
        let own = OWN_CRATES.contains(&name.as_str());
        for site in scan.hazards() {
            if own {
                own_hazards += 1;
                say!("MISCOMPILED SHAPE in {name}: {}", site.function);
            } else {
                dependency_hazards += 1;
                say!("in dependency {name}: {}", site.function);
            }
            say!("    {}:{}\n    select:    {}", path.display(), site.line, site.select);
            say!("    condition: {}\n    from:      {}", site.condition, site.source);
        }
    }
    say!(
        "ir-scan: {} crates, {functions} functions, {selects} selects of two loads; on a `trunc nuw` condition: \
         {guarded} read where the program reads it (!noundef), {two_objects} possibly unwritten but choosing \
         between two objects (a conditional move at worst), and possibly unwritten choosing between fields of one \
         object: {own_hazards} in this workspace, {dependency_hazards} in dependencies",
        files.len()
    );
    if own_hazards > 0 {
        say!(
            "ir-scan: FAILED: LLVM 22's x86 selector may turn these into loads from wild addresses \
             (docs/miscompilation.md says how to keep the read out of line)"
        );
    } else {
        say!("ir-scan: ok, none in this workspace's crates");
    }
    Ok(own_hazards == 0)
}

/// The newest `.ll` file of each crate build in `deps` (`name-hash.ll`); for this workspace's
/// crates only the newest one, as earlier builds leave theirs behind.
fn ir_files(deps: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let entries = std::fs::read_dir(deps).map_err(|error| format!("cannot read {}: {error}", deps.display()))?;
    let mut files: Vec<(String, std::time::SystemTime, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|extension| extension != "ll") {
            continue;
        }
        let stem = path.file_stem().and_then(|stem| stem.to_str()).unwrap_or_default();
        let name = stem.rsplit_once('-').map_or(stem, |(name, _)| name).to_owned();
        let modified = entry.metadata().and_then(|metadata| metadata.modified()).map_err(|error| error.to_string())?;
        files.push((name, modified, path));
    }
    files.sort();
    let mut kept: Vec<(String, PathBuf)> = Vec::new();
    for (index, (name, _, path)) in files.iter().enumerate() {
        let newer_exists = files[index + 1..].iter().any(|(other, _, _)| other == name);
        if OWN_CRATES.contains(&name.as_str()) && newer_exists {
            continue;
        }
        kept.push((name.clone(), path.clone()));
    }
    Ok(kept)
}

fn repro_command() -> Result<bool, String> {
    let root = root();
    let source = root.join("xtask/repro/select_of_loads.rs");
    let out_dir = root.join("target/miscompile-repro");
    std::fs::create_dir_all(&out_dir).map_err(|error| format!("cannot create {}: {error}", out_dir.display()))?;
    let binary = out_dir.join("select_of_loads");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let version = Command::new(&rustc).arg("-vV").output().map_err(|error| format!("cannot run rustc: {error}"))?;
    let version = String::from_utf8_lossy(&version.stdout);
    let describe = |prefix: &str| version.lines().find_map(|line| line.strip_prefix(prefix)).unwrap_or("?").to_owned();
    say!(
        "toolchain: rustc {} (LLVM {}), host {}",
        describe("release: "),
        describe("LLVM version: "),
        describe("host: ")
    );
    run(Command::new(&rustc).arg("-O").arg("--edition=2024").arg(&source).arg("-o").arg(&binary))?;
    let output = Command::new(&binary).output().map_err(|error| format!("cannot run {}: {error}", binary.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if output.status.success() && stdout.trim() == "1" {
        say!(
            "miscompile-repro: not reproduced: the reproducer printed 1, as the source says it must. This \
             toolchain has the fix (llvm/llvm-project#208683) or does not make the shape; the out-of-line \
             accessors of docs/miscompilation.md can stay (they cost nothing measurable)"
        );
    } else {
        say!(
            "miscompile-repro: REPRODUCED: safe Rust that must print 1 ended with {} (stdout {:?}). This \
             toolchain miscompiles the shape; `cargo xtask ir-scan` guards this workspace against it",
            describe_status(output.status),
            stdout.trim()
        );
    }
    Ok(true)
}

/// `signal 11 (SIGSEGV)` or `exit status 3`.
pub fn describe_status(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(signal) => format!("signal {signal} ({})", signal_name(signal)),
        None => format!("exit status {}", status.code().unwrap_or(-1)),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "a signal",
    }
}
