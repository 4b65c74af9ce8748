//! A throwaway PostgreSQL 15 server for the conformance tester and its tests ([`TempServer`]),
//! and [`PgCtl`], which starts, stops and restarts a server by its data directory.
//!
//! PostgreSQL refuses to run as root. When this process is root (as on CI), `initdb` and
//! `pg_ctl` run through `runuser -u <user>`: as `postgres` (which the Debian package creates)
//! for a new server, as the owner of the data directory for an existing one.

use super::pgwire::{Connection, Host, PgError, Target};
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// The role [`TempServer`] creates (trust authentication, superuser).
pub const SUPERUSER: &str = "handoff";

/// How a [`TempServer`] is set up.
#[derive(Clone, Debug)]
pub struct Options {
    /// The WAL segment size in MB (`initdb --wal-segsize`): a power of 2 from 1 to 1024.
    pub wal_segment_size_mb: u32,
    /// More `postgresql.conf` settings, `(name, value)`, written as `name = 'value'` after
    /// (and so overriding) the defaults of [`TempServer::start`].
    pub settings: Vec<(String, String)>,
}

impl Default for Options {
    /// PostgreSQL's default 16 MB segments, no extra settings.
    fn default() -> Options {
        Options { wal_segment_size_mb: 16, settings: Vec::new() }
    }
}

// ---------------------------------------------------------------------------------------------
// pg_ctl.

/// The PostgreSQL 15 programs, run as the right user, and where `pg_ctl start` sends the
/// server's output.
#[derive(Clone, Debug)]
pub struct PgCtl {
    bin_dir: PathBuf,
    log: Option<PathBuf>,
}

impl PgCtl {
    /// Finds the PostgreSQL 15 programs (`initdb`, `pg_ctl`): in the directory named by
    /// `HANDOFF_PG_BIN` if it is set (any version: an explicit choice), else in
    /// `/usr/lib/postgresql/15/bin`, else on `PATH` if `pg_ctl --version` says 15.
    pub fn find() -> Result<PgCtl, String> {
        let has_programs = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
        if let Some(dir) = std::env::var_os("HANDOFF_PG_BIN") {
            let dir = PathBuf::from(dir);
            return match has_programs(&dir) {
                true => Ok(PgCtl { bin_dir: dir, log: None }),
                false => Err(format!("HANDOFF_PG_BIN={} does not hold initdb and pg_ctl", dir.display())),
            };
        }
        let debian = Path::new("/usr/lib/postgresql/15/bin");
        if has_programs(debian) {
            return Ok(PgCtl { bin_dir: debian.to_path_buf(), log: None });
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        for dir in std::env::split_paths(&path) {
            if has_programs(&dir) && major_version(&dir.join("pg_ctl")).as_deref() == Some("15") {
                return Ok(PgCtl { bin_dir: dir, log: None });
            }
        }
        Err("PostgreSQL 15 binaries not found (looked in $HANDOFF_PG_BIN, /usr/lib/postgresql/15/bin, PATH): \
             install the Debian package postgresql-15"
            .to_string())
    }

    /// The directory holding the programs.
    pub fn bin_dir(&self) -> &Path {
        &self.bin_dir
    }

    /// Sends the server's output to `log` (which the owner of the data directory must be able
    /// to write) instead of `<data dir>/handoff-conform.log`.
    pub fn with_log(self, log: impl Into<PathBuf>) -> PgCtl {
        PgCtl { log: Some(log.into()), ..self }
    }

    /// `pg_ctl start -w -t 60`: starts the server of `data_dir` and waits until it accepts
    /// connections. An error quotes the end of the server's output.
    pub fn start(&self, data_dir: &Path) -> Result<(), String> {
        let log = self.log.clone().unwrap_or_else(|| data_dir.join("handoff-conform.log"));
        let args = [os("-D"), data_dir.into(), os("-l"), log.clone().into(), os("-w"), os("-t"), os("60"), os("start")];
        self.run("pg_ctl", &args, &owner_of(data_dir)?).map_err(|error| with_log(error, &log))
    }

    /// `pg_ctl stop -m <mode> -w -t 60`: stops the server of `data_dir`; `mode` is `smart`,
    /// `fast` (roll back transactions, end sessions, checkpoint) or `immediate` (no checkpoint:
    /// the next start recovers from the WAL, as after a crash).
    pub fn stop(&self, data_dir: &Path, mode: &str) -> Result<(), String> {
        if !["smart", "fast", "immediate"].contains(&mode) {
            return Err(format!("unknown shutdown mode `{mode}` (smart, fast or immediate)"));
        }
        let args = [os("-D"), data_dir.into(), os("-m"), os(mode), os("-w"), os("-t"), os("60"), os("stop")];
        self.run("pg_ctl", &args, &owner_of(data_dir)?)
    }

    /// Stops the server of `data_dir` in `mode` (see [`stop`](Self::stop)) and starts it again
    /// (see [`start`](Self::start)). As root, `pg_ctl` runs as the owner of the data directory.
    pub fn restart(&self, data_dir: &Path, mode: &str) -> Result<(), String> {
        self.stop(data_dir, mode)?;
        self.start(data_dir)
    }

    /// Runs one of the programs as `user` (`None`: as this process), in `/` so that a working
    /// directory the user cannot read does not matter; an error quotes its output.
    fn run(&self, program: &str, args: &[OsString], user: &Option<String>) -> Result<(), String> {
        let path = self.bin_dir.join(program);
        let mut command = match user {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.arg("-u").arg(user).arg("--").arg(&path);
                command
            }
            None => Command::new(&path),
        };
        command.args(args).current_dir("/").stdin(Stdio::null());
        let shown = format!(
            "{} {}",
            path.display(),
            args.iter().map(|arg| arg.to_string_lossy()).collect::<Vec<_>>().join(" ")
        );
        let shown = match user {
            Some(user) => format!("`{shown}` (as {user})"),
            None => format!("`{shown}`"),
        };
        let output = command.output().map_err(|error| format!("cannot run {shown}: {error}"))?;
        if output.status.success() {
            return Ok(());
        }
        let mut said = String::from_utf8_lossy(&output.stderr).trim().to_string();
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !stdout.trim().is_empty() {
            said = format!("{}\n{said}", stdout.trim());
        }
        Err(format!("{shown} failed ({}):\n{said}", output.status))
    }
}

fn os(text: &str) -> OsString {
    OsString::from(text)
}

/// `N` of `pg_ctl (PostgreSQL) N.M ...`.
fn major_version(pg_ctl: &Path) -> Option<String> {
    let output = Command::new(pg_ctl).arg("--version").stdin(Stdio::null()).output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let version = text.split("(PostgreSQL) ").nth(1)?;
    Some(version.split(['.', ' ', '\n']).next()?.to_string())
}

/// Appends the last lines of the server log to an error.
fn with_log(error: String, log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(20)..].join("\n");
    if tail.is_empty() { error } else { format!("{error}\nserver log {}:\n{tail}", log.display()) }
}

/// Whether this process runs as root.
fn is_root() -> bool {
    fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}

/// Who should run `pg_ctl` for `data_dir`: `None` (this process) unless we are root, else the
/// directory's owner.
fn owner_of(data_dir: &Path) -> Result<Option<String>, String> {
    if !is_root() {
        return Ok(None);
    }
    let uid = fs::metadata(data_dir).map_err(|error| format!("{}: {error}", data_dir.display()))?.uid();
    if uid == 0 {
        return Ok(None); // pg_ctl will refuse, and say why.
    }
    passwd_entries()
        .into_iter()
        .find(|entry| entry.1 == uid)
        .map(|entry| Some(entry.0))
        .ok_or_else(|| format!("{} belongs to uid {uid}, which /etc/passwd does not name", data_dir.display()))
}

/// The (name, uid, gid) entries of `/etc/passwd`.
fn passwd_entries() -> Vec<(String, u32, u32)> {
    let text = fs::read_to_string("/etc/passwd").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(':');
            let name = fields.next()?;
            let uid = fields.nth(1)?.parse().ok()?;
            let gid = fields.next()?.parse().ok()?;
            Some((name.to_string(), uid, gid))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The temporary server.

/// Numbers the servers of this process.
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A PostgreSQL server in a fresh temporary directory, listening only on a unix socket there,
/// with trust authentication for the superuser [`SUPERUSER`]. Dropping it stops the server
/// and removes the directory.
#[derive(Debug)]
pub struct TempServer {
    pg_ctl: PgCtl,
    /// The temporary directory: `data/`, `log`, and the socket.
    dir: PathBuf,
    /// `<dir>/data`.
    data: PathBuf,
    port: u16,
}

impl TempServer {
    /// Creates `<temp dir>/handoff-pg-<pid>-<n>`, runs `initdb` there (`--wal-segsize` from
    /// `options`, trust authentication, superuser [`SUPERUSER`], UTF8, C locale, no sync),
    /// configures the server — unix socket in the directory only, `wal_level = logical`,
    /// 20 replication slots and WAL senders, no autovacuum, no fsync, a day between timed
    /// checkpoints, warnings and worse logged, then `options.settings` — and starts it.
    ///
    /// As root, the directory is given to the `postgres` user, who runs the server. The
    /// temporary directory must be one `postgres` can reach (`/tmp` is).
    pub fn start(options: &Options) -> Result<TempServer, String> {
        let size = options.wal_segment_size_mb;
        if !size.is_power_of_two() || size > 1024 {
            return Err(format!("WAL segment size {size} MB is not a power of 2 from 1 to 1024"));
        }
        for (name, _) in &options.settings {
            if name.is_empty() || !name.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"_.".contains(&byte)) {
                return Err(format!("`{name}` is not a setting name"));
            }
        }
        let pg_ctl = PgCtl::find()?;
        let (dir, port) = make_dir()?;
        let pg_ctl = pg_ctl.with_log(dir.join("log"));
        // From here on, dropping the server cleans up.
        let server = TempServer { pg_ctl, data: dir.join("data"), dir, port };
        let socket = server.dir.join(format!(".s.PGSQL.{port}"));
        if socket.as_os_str().len() > 107 {
            return Err(format!("the socket path {} is too long for a unix socket: set TMPDIR", socket.display()));
        }
        let run_as = if is_root() {
            let (_, uid, gid) = passwd_entries().into_iter().find(|entry| entry.0 == "postgres").ok_or(
                "running as root, and there is no `postgres` user to run PostgreSQL as: install postgresql-15",
            )?;
            std::os::unix::fs::chown(&server.dir, Some(uid), Some(gid))
                .map_err(|error| format!("cannot give {} to postgres: {error}", server.dir.display()))?;
            Some("postgres".to_string())
        } else {
            None
        };
        let data = server.data.clone();
        let initdb = [
            os("-D"),
            data.clone().into(),
            os(&format!("--wal-segsize={size}")),
            os("-A"),
            os("trust"),
            os("-U"),
            os(SUPERUSER),
            os("--no-sync"),
            os("--no-instructions"),
            os("-E"),
            os("UTF8"),
            os("--locale=C"),
        ];
        server.pg_ctl.run("initdb", &initdb, &run_as)?;
        let dir = server.dir.to_string_lossy().into_owned();
        let mut settings: Vec<(&str, &str)> = vec![
            ("listen_addresses", ""),
            ("unix_socket_directories", &dir),
            ("wal_level", "logical"),
            ("max_replication_slots", "20"),
            ("max_wal_senders", "20"),
            ("autovacuum", "off"),
            ("fsync", "off"),
            ("checkpoint_timeout", "1d"),
            ("log_min_messages", "warning"),
        ];
        let port = port.to_string();
        settings.push(("port", &port));
        settings.extend(options.settings.iter().map(|(name, value)| (name.as_str(), value.as_str())));
        let mut conf = String::from("\n# handoff conform TempServer\n");
        for (name, value) in settings {
            conf.push_str(&format!("{name} = '{}'\n", value.replace('\'', "''")));
        }
        let conf_path = data.join("postgresql.conf");
        let mut text = fs::read_to_string(&conf_path).map_err(|error| format!("{}: {error}", conf_path.display()))?;
        text.push_str(&conf);
        fs::write(&conf_path, text).map_err(|error| format!("{}: {error}", conf_path.display()))?;
        server.pg_ctl.start(&data)?;
        Ok(server)
    }

    /// The server's address for `dbname`: its socket directory, port and superuser.
    pub fn target(&self, dbname: &str) -> Target {
        Target {
            host: Host::Unix(self.dir.clone()),
            port: self.port,
            user: SUPERUSER.to_string(),
            password: None,
            dbname: dbname.to_string(),
        }
    }

    /// [`target`](Self::target) as a URL, `postgres://handoff@%2Ftmp%2Fhandoff-pg-...:<port>/<dbname>`.
    pub fn url(&self, dbname: &str) -> String {
        self.target(dbname).to_string()
    }

    /// Connects to `dbname` as the superuser (see [`Connection::connect`]).
    pub fn connect(&self, dbname: &str, replication: bool) -> Result<Connection, PgError> {
        Connection::connect(&self.target(dbname), replication)
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// The programs that run the server (with its log).
    pub fn pg_ctl(&self) -> &PgCtl {
        &self.pg_ctl
    }

    /// Stops the server in `mode` (`smart`, `fast` or `immediate`, see [`PgCtl::stop`]) and
    /// starts it again.
    pub fn restart(&self, mode: &str) -> Result<(), String> {
        self.pg_ctl.restart(&self.data, mode)
    }

    /// The server log so far, for diagnostics.
    pub fn log(&self) -> String {
        fs::read(self.log_path()).map(|bytes| String::from_utf8_lossy(&bytes).into_owned()).unwrap_or_default()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("log")
    }
}

/// Stops the server (immediately: nothing is kept) and removes its directory, ignoring errors.
impl Drop for TempServer {
    fn drop(&mut self) {
        if self.data.join("postmaster.pid").exists() {
            let _ = self.pg_ctl.stop(&self.data, "immediate");
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Creates a new directory `<temp dir>/handoff-pg-<pid>-<n>` and picks a port for it. The
/// socket lives in that directory, so the port cannot collide with another server's; it is
/// only chosen apart per process and server to tell the servers apart.
fn make_dir() -> Result<(PathBuf, u16), String> {
    let pid = std::process::id();
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("handoff-pg-{pid}-{n}"));
        match fs::create_dir(&dir) {
            Ok(()) => {
                let port = 20000 + (pid % 20000 + n) % 40000;
                return Ok((dir, u16::try_from(port).unwrap_or(20000)));
            }
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(format!("cannot create {}: {error}", dir.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conform::pgwire::{PgOutput, ReplicationMessage, parse_pgoutput};
    use handoff_models::core::lsn::Lsn;
    use std::time::{Duration, Instant};

    /// Reads the stream until a pgoutput Commit; returns the Begin's final LSN and the Commit.
    fn next_transaction(stream: &mut crate::conform::pgwire::ReplicationStream) -> (u64, u64, u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut begin = None;
        while Instant::now() < deadline {
            let Some(message) = stream.recv(Duration::from_millis(500)).expect("receives") else { continue };
            let ReplicationMessage::XLogData { data, .. } = message else { continue };
            match parse_pgoutput(&data).expect("pgoutput") {
                PgOutput::Begin { final_lsn, .. } => begin = Some(final_lsn),
                PgOutput::Commit { commit_lsn, end_lsn } => {
                    return (begin.expect("Begin before Commit"), commit_lsn, end_lsn);
                }
                PgOutput::Change { .. } | PgOutput::Message { .. } | PgOutput::Other(_) => {}
            }
        }
        panic!("no transaction within 10 s");
    }

    fn confirmed_flush(sql: &mut Connection) -> Option<String> {
        sql.query_one("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 's'").expect("query")
    }

    #[test]
    fn streams_a_slot_confirms_restarts_and_cleans_up() {
        let started = Instant::now();
        let options = Options { wal_segment_size_mb: 1, settings: vec![("wal_sender_timeout".into(), "30s".into())] };
        let server = TempServer::start(&options).expect("server starts");
        assert!(Target::parse(&server.url("postgres")).is_ok_and(|target| target == server.target("postgres")));
        let mut sql = server.connect("postgres", false).expect("connects");
        assert_eq!(sql.query_one("SHOW wal_segment_size").expect("query").as_deref(), Some("1MB"));

        // Errors keep the connection usable.
        let error = sql.simple_query("SELECT * FROM missing").expect_err("no such table");
        assert_eq!(error.code(), Some("42P01"), "{error}");
        assert_eq!(sql.query_one("SELECT 1").expect("query").as_deref(), Some("1"));

        sql.simple_query("CREATE TABLE t (id int PRIMARY KEY, v text); CREATE PUBLICATION p FOR ALL TABLES")
            .expect("setup");
        sql.simple_query("SELECT * FROM pg_create_logical_replication_slot('s', 'pgoutput')").expect("slot");
        let created = confirmed_flush(&mut sql).expect("a confirmed position");
        sql.simple_query("BEGIN; INSERT INTO t VALUES (1, NULL); COMMIT").expect("insert");
        let rows = sql.simple_query("SELECT id, v FROM t").expect("select");
        assert_eq!(rows, vec![vec![Some("1".to_string()), None]]);

        let options = [("proto_version", "1"), ("publication_names", "p")];
        let replication = server.connect("postgres", true).expect("replication connection");
        let mut stream = replication.start_replication("s", "0/0", &options).expect("streams");
        let (final_lsn, commit_lsn, end_lsn) = next_transaction(&mut stream);
        assert_eq!(final_lsn, commit_lsn);
        assert!(end_lsn > commit_lsn);
        stream.send_status(end_lsn, end_lsn, end_lsn, false).expect("status");
        stream.stop().expect("stops");
        assert_eq!(confirmed_flush(&mut sql), Some(Lsn(end_lsn).to_string()));

        // A clean restart ends the sessions and keeps the slot. PostgreSQL 15 writes a logical
        // slot to disk only when its restart_lsn or catalog_xmin advance (after decoding an
        // xl_running_xacts record, logged by checkpoints and every 15 s of activity), not at
        // the shutdown checkpoint, so the confirmation may be lost: then the transaction is
        // sent again.
        server.restart("fast").expect("restarts");
        let old = sql.query_one("SELECT 1").expect_err("the old session is gone");
        assert!(old.is_disconnect(), "{old}");
        let mut sql = server.connect("postgres", false).expect("connects after the restart");
        let after = confirmed_flush(&mut sql).expect("the slot survives");
        assert!(after == Lsn(end_lsn).to_string() || after == created, "confirmed {after} after the restart");
        assert!(server.restart("sideways").is_err());

        // Terminating the walsender ends the stream with FATAL 57P01.
        sql.simple_query("INSERT INTO t VALUES (2, 'two')").expect("insert");
        let replication = server.connect("postgres", true).expect("replication connection");
        let mut stream = replication.start_replication("s", "0/0", &options).expect("streams");
        let (_, _, mut next_end) = next_transaction(&mut stream);
        if after == created {
            assert_eq!(next_end, end_lsn, "the first transaction again");
            (_, _, next_end) = next_transaction(&mut stream);
        }
        assert!(next_end > end_lsn);
        let terminated = sql
            .query_one("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 's'")
            .expect("terminates");
        assert_eq!(terminated.as_deref(), Some("t"));
        let ended = loop {
            match stream.recv(Duration::from_secs(5)) {
                Ok(Some(_)) => {}
                Ok(None) => panic!("the stream did not end"),
                Err(error) => break error,
            }
        };
        assert!(ended.is_disconnect(), "{ended}");
        assert_eq!(ended.code(), Some("57P01"), "{ended}");
        assert!(stream.stop().is_ok());

        let dir = server.dir.clone();
        assert!(dir.join("data").is_dir());
        drop(server);
        assert!(!dir.exists(), "{} is left behind", dir.display());
        assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
    }

    #[test]
    fn authenticates_with_passwords() {
        let server = TempServer::start(&Options::default()).expect("server starts");
        let mut sql = server.connect("postgres", false).expect("connects");
        sql.simple_query(
            "CREATE ROLE scram_user LOGIN PASSWORD 'scram pw'; \
             CREATE ROLE plain_user LOGIN PASSWORD 'plain pw'; \
             SET password_encryption = 'md5'; \
             CREATE ROLE md5_user LOGIN PASSWORD 'md5 pw'",
        )
        .expect("roles");
        let hba = server.data_dir().join("pg_hba.conf");
        let text = fs::read_to_string(&hba).expect("pg_hba.conf");
        let rules = "local all scram_user scram-sha-256\nlocal all md5_user md5\nlocal all plain_user password\n";
        fs::write(&hba, format!("{rules}{text}")).expect("writes pg_hba.conf");
        assert_eq!(sql.query_one("SELECT pg_reload_conf()").expect("reload").as_deref(), Some("t"));

        for (user, password) in [("scram_user", "scram pw"), ("md5_user", "md5 pw"), ("plain_user", "plain pw")] {
            let target = Target { user: user.into(), password: Some(password.into()), ..server.target("postgres") };
            let mut connection = Connection::connect(&target, false).unwrap_or_else(|error| panic!("{user}: {error}"));
            assert_eq!(connection.query_one("SELECT current_user").expect("query").as_deref(), Some(user));
            let wrong = Target { password: Some("wrong".into()), ..target.clone() };
            let error = Connection::connect(&wrong, false).err().expect("wrong password");
            assert_eq!(error.code(), Some("28P01"), "{user}: {error}");
            let none = Target { password: None, ..target };
            let error = Connection::connect(&none, false).err().expect("no password");
            assert!(matches!(error, PgError::Protocol(_)), "{user}: {error}");
        }
    }
}
