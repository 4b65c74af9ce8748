//! Targets: `postgres://` URLs.

use super::*;

/// Where to connect: parsed from a `postgres://user:password@host:port/dbname` URL.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    /// The server's host name or address, or the directory of its unix socket.
    pub host: Host,
    /// The TCP port, which also names the unix socket file (`.s.PGSQL.<port>`).
    pub port: u16,
    /// The role to log in as.
    pub user: String,
    /// The password, if the URL has one (only asked for when the server wants it).
    pub password: Option<String>,
    /// The database to connect to.
    pub dbname: String,
}

/// Where the server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// A TCP host name or address.
    Tcp(String),
    /// A directory holding the unix socket file `.s.PGSQL.<port>`.
    Unix(PathBuf),
}

impl Target {
    /// Parses a `postgres://` or `postgresql://` URL:
    /// `postgres://[user[:password]@][host][:port][/dbname][?param=value&...]`.
    ///
    /// User, password, host, dbname and parameter values are percent-decoded. A host that
    /// starts with `/` (written `%2F...` in the host part, or given as `?host=/dir`) is the
    /// directory of a unix socket, whose file is `<dir>/.s.PGSQL.<port>`; an IPv6 address is
    /// written in brackets. Defaults: host `localhost`, port 5432, user `postgres`, dbname the
    /// user. The query parameters `host`, `port`, `user`, `password` and `dbname` override the
    /// parts of the URL; `sslmode=disable` is accepted (TLS is not supported, so any other
    /// `sslmode` is an error), and any other parameter is an error.
    ///
    /// Errors name the problem and quote the URL with its password hidden.
    pub fn parse(url: &str) -> Result<Target, String> {
        let shown = redact(url);
        let rest = url
            .strip_prefix("postgres://")
            .or_else(|| url.strip_prefix("postgresql://"))
            .ok_or_else(|| format!("`{shown}` is not a postgres:// URL"))?;
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (rest, query),
            None => (rest, ""),
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((userinfo, hostport)) => (userinfo, hostport),
            None => ("", authority),
        };
        let decode = |text: &str, what: &str| percent_decode(text).map_err(|why| format!("{what} in `{shown}`: {why}"));
        let (mut user, mut password) = match userinfo.split_once(':') {
            Some((user, password)) => (decode(user, "user")?, Some(decode(password, "password")?)),
            None => (decode(userinfo, "user")?, None),
        };
        let (host, port) = if let Some(bracketed) = hostport.strip_prefix('[') {
            let (host, after) =
                bracketed.split_once(']').ok_or_else(|| format!("host `{hostport}` in `{shown}` lacks its `]`"))?;
            match after.strip_prefix(':') {
                Some(port) => (host, port),
                None if after.is_empty() => (host, ""),
                None => return Err(format!("unexpected `{after}` after the host in `{shown}`")),
            }
        } else {
            hostport.rsplit_once(':').unwrap_or((hostport, ""))
        };
        let mut host = decode(host, "host")?;
        let mut port = parse_port(port, &shown)?;
        let mut dbname = decode(path, "dbname")?;
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (name, value) =
                pair.split_once('=').ok_or_else(|| format!("query parameter `{pair}` in `{shown}` has no value"))?;
            let value = decode(value, name)?;
            match name {
                "host" => host = value,
                "port" => port = parse_port(&value, &shown)?,
                "user" => user = value,
                "password" => password = Some(value),
                "dbname" => dbname = value,
                "sslmode" if value == "disable" => {}
                "sslmode" => return Err(format!("sslmode={value} in `{shown}`: TLS is not supported")),
                _ => return Err(format!("unknown query parameter `{name}` in `{shown}`")),
            }
        }
        let host = if host.is_empty() {
            Host::Tcp("localhost".to_string())
        } else if host.starts_with('/') {
            Host::Unix(PathBuf::from(host))
        } else {
            Host::Tcp(host)
        };
        if user.is_empty() {
            user = "postgres".to_string();
        }
        if dbname.is_empty() {
            dbname = user.clone();
        }
        Ok(Target { host, port, user, password, dbname })
    }

    /// The same server and role, another database.
    pub fn with_dbname(&self, dbname: &str) -> Target {
        Target { dbname: dbname.to_string(), ..self.clone() }
    }
}

/// The URL, without the password: `postgres://user@host:port/dbname`, a unix socket directory
/// percent-encoded as the host (`%2Ftmp%2Fdir`). [`Target::parse`] reads it back.
impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = match &self.host {
            Host::Tcp(host) if host.contains(':') => format!("[{host}]"),
            Host::Tcp(host) => percent_encode(host),
            Host::Unix(dir) => percent_encode(&dir.to_string_lossy()),
        };
        let (user, dbname) = (percent_encode(&self.user), percent_encode(&self.dbname));
        write!(f, "postgres://{user}@{host}:{}/{dbname}", self.port)
    }
}

/// As [`Display`](fmt::Display), with the password (if any) shown as `***`.
impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let password = if self.password.is_some() { " (password ***)" } else { "" };
        write!(f, "Target({self}{password})")
    }
}

fn parse_port(port: &str, shown: &str) -> Result<u16, String> {
    if port.is_empty() {
        return Ok(5432);
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("port `{port}` in `{shown}` is not a number from 1 to 65535")),
        Ok(port) => Ok(port),
    }
}

/// Decodes `%XX` escapes; the result must be UTF-8.
fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        if byte != b'%' {
            out.push(byte);
            at += 1;
            continue;
        }
        let escape = bytes.get(at + 1..at + 3).filter(|hex| hex.iter().all(u8::is_ascii_hexdigit));
        let value = escape
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok())
            .ok_or_else(|| format!("`%` not followed by two hex digits in `{text}`"))?;
        out.push(value);
        at += 3;
    }
    String::from_utf8(out).map_err(|_| format!("`{text}` does not decode to UTF-8"))
}

/// Encodes everything but the URL's unreserved characters.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The URL with the password of its user part and of a `password=` parameter replaced by `***`,
/// for error messages.
fn redact(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    let mut shown = match head.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(authority_end);
            match authority.rsplit_once('@') {
                Some((userinfo, hostport)) if userinfo.contains(':') => {
                    let user = userinfo.split(':').next().unwrap_or_default();
                    format!("{scheme}://{user}:***@{hostport}{path}")
                }
                _ => head.to_string(),
            }
        }
        None => head.to_string(),
    };
    if let Some(query) = query {
        let pairs: Vec<&str> =
            query.split('&').map(|pair| if pair.starts_with("password=") { "password=***" } else { pair }).collect();
        shown.push('?');
        shown.push_str(&pairs.join("&"));
    }
    shown
}
