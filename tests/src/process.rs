//! Starting, waiting for and stopping the real binaries under test.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Path of a workspace binary (`catalog`, `resource-monitor`, `aggregator`).
pub fn bin_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test-exe> -> target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test executable lives in target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is not built; run `cargo build --workspace --bins` first (the test script does)",
        path.display()
    );
    path
}

/// A loopback port that nothing listens on and that no other test process
/// of this run was handed.
///
/// Only for a port that must be known before its server starts (a client
/// told where an upstream will be, a server restarted where its clients
/// know it, a port that must refuse connections): every other server is
/// started on port 0 and read back from its announcement
/// ([`Spawn::start_announced`]), which no other process can take meanwhile.
///
/// A port handed out here stays unbound until the test binds it, which can
/// be seconds later (a server restarted on it, a client's upstream that
/// never comes). The kernel hands out every port of its ephemeral range
/// (`/proc/sys/net/ipv4/ip_local_port_range`) to any `bind` on port 0 and
/// to every outgoing connection, so a port picked from that range could be
/// taken meanwhile by any socket of any process — the more of them, the
/// busier the machine. So the port comes from outside that range
/// ([`outside_ephemeral`]), where only an explicit bind can take it, and is
/// checked to be bindable now.
///
/// nextest runs every test in its own process, all at once: two of them
/// picking a port could pick the same one, and then one test's server
/// would silently serve the other test. So each port handed out is marked
/// with a file no other test process can create again; marks older than
/// [`PORT_MARK_TTL`] are forgotten and removed (every call sweeps them, so
/// the directory does not grow).
pub fn free_port() -> u16 {
    let dir = std::env::temp_dir().join("liqo-broker-e2e-ports");
    let marks = std::fs::create_dir_all(&dir).is_ok();
    if marks {
        sweep_stale_marks(&dir);
    }
    let range = outside_ephemeral();
    for attempt in 0u64..1000 {
        let port = match &range {
            Some(range) => pick(range, attempt),
            // No room outside the ephemeral range: the best left is a port
            // that is free now.
            None => system_free_port(),
        };
        let mark = dir.join(port.to_string());
        let marked = marks
            && match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&mark)
            {
                Ok(_) => true,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if is_stale(&mark) {
                        let _ = std::fs::remove_file(&mark);
                    }
                    continue;
                }
                // Cannot mark (read-only temp dir?): unmarked, as a port
                // picked by the system would be.
                Err(_) => false,
            };
        // Something outside this scheme (another program) may hold it.
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
        if marked {
            let _ = std::fs::remove_file(&mark);
        }
    }
    panic!("no bindable loopback port left in {range:?} after 1000 tries")
}

/// Lowest port [`free_port`] hands out: clear of the registered ports
/// services commonly listen on (databases, web servers on 8080, …).
const LOWEST_PORT: u16 = 20_000;

/// Fewest ports worth picking from: with fewer, a random pick would keep
/// meeting the marks of the other test processes.
const LEAST_POOL: u32 = 1_000;

/// The loopback ports no ephemeral allocation can hand out: below the
/// kernel's ephemeral range (from [`LOWEST_PORT`], else from 1024 up), or
/// above it; `None` when the range leaves too little room on either side.
/// A range that cannot be read (not Linux) is taken as Linux's default,
/// 32768–60999.
fn outside_ephemeral() -> Option<std::ops::RangeInclusive<u16>> {
    let (low, high) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| {
            let mut bounds = text.split_whitespace().map(str::parse::<u16>);
            Some((bounds.next()?.ok()?, bounds.next()?.ok()?))
        })
        .unwrap_or((32_768, 60_999));
    let size = |r: &std::ops::RangeInclusive<u16>| {
        u32::from(*r.end()).saturating_sub(u32::from(*r.start())) + 1
    };
    let below = |floor: u16| (low > floor).then(|| floor..=low - 1);
    [
        below(LOWEST_PORT),
        below(1024),
        (high < u16::MAX).then(|| high + 1..=u16::MAX),
    ]
    .into_iter()
    .flatten()
    .find(|r| size(r) >= LEAST_POOL)
}

/// A port of `range`, a different one each call and in each process.
fn pick(range: &std::ops::RangeInclusive<u16>, attempt: u64) -> u16 {
    use std::hash::{BuildHasher, Hasher};
    // Randomly keyed per process (and per call): test processes starting
    // together do not walk the range in step.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(attempt);
    let span = u64::from(*range.end() - *range.start()) + 1;
    let offset = u16::try_from(hasher.finish() % span).unwrap_or(0);
    *range.start() + offset
}

/// Longer than any test holds a port.
const PORT_MARK_TTL: Duration = Duration::from_secs(600);

fn is_stale(mark: &std::path::Path) -> bool {
    std::fs::metadata(mark)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > PORT_MARK_TTL)
}

/// Remove the marks no test can still hold (best effort: another test
/// process may be removing the same ones).
fn sweep_stale_marks(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if is_stale(&entry.path()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn system_free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral loopback port")
}

/// Wait up to `timeout` for `child` to exit and return its status; after
/// that, kill it and fail.
pub fn exit_within(
    child: &mut std::process::Child,
    timeout: Duration,
) -> Result<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("still running after {timeout:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait until something accepts TCP connections on `port`.
pub fn wait_for_port(port: u16, timeout: Duration) -> Result<()> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    bail!("nothing listened on 127.0.0.1:{port} within {timeout:?}")
}

/// The processes holding a socket that listens on TCP `port` (IPv4 or
/// IPv6), read from `/proc`: a port picked in advance may have been taken
/// by some other process meanwhile, and "something answers there" does not
/// say that our child is what answers.
pub fn listening_pids(port: u16) -> Vec<u32> {
    // Socket inodes in state 0A (LISTEN) whose local port is `port`.
    let mut inodes = std::collections::HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let local_port = local
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            if *state == "0A" && local_port == Some(port) {
                inodes.insert(format!("socket:[{inode}]"));
            }
        }
    }
    let mut pids = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .ok()
                .and_then(|target| target.to_str().map(|t| inodes.contains(t)))
                .unwrap_or(false)
        });
        if holds {
            pids.push(pid);
        }
    }
    pids
}

/// Wait until the log file at `log` holds `needle`, up to `within`; the
/// whole log so far, or a panic quoting it. A condition to wait for where a
/// process says what it did only in its log.
#[track_caller]
pub fn wait_for_log(log: &std::path::Path, needle: &str, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in {} within {within:?}:\n{text}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How to start one binary.
pub struct Spawn {
    name: String,
    cmd: Command,
}

impl Spawn {
    pub fn new(bin: &str) -> Self {
        let mut cmd = Command::new(bin_path(bin));
        cmd.stdin(Stdio::null());
        // Logs go to the test's stderr, which the runner shows on failure.
        cmd.stdout(Stdio::inherit()).stderr(Stdio::inherit());
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        Self {
            name: bin.to_string(),
            cmd,
        }
    }

    /// Start `bin` through a wrapper command (`wrapper[0]` with the rest of
    /// `wrapper` as its first arguments, then the binary's path, then the
    /// binary's own arguments), e.g. `unshare … sh -c 'set-up; exec "$@"' sh`.
    pub fn wrapped(bin: &str, wrapper: &[&str]) -> Self {
        let (program, first) = wrapper.split_first().expect("a wrapper command");
        let mut spawn = Self::new(bin);
        let mut cmd = Command::new(program);
        cmd.args(first).arg(bin_path(bin));
        cmd.stdin(Stdio::null());
        cmd.stdout(Stdio::inherit()).stderr(Stdio::inherit());
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        spawn.cmd = cmd;
        spawn
    }

    /// Remove `k` from the environment the process starts with.
    pub fn env_remove(mut self, k: &str) -> Self {
        self.cmd.env_remove(k);
        self
    }

    pub fn arg(mut self, a: impl AsRef<std::ffi::OsStr>) -> Self {
        self.cmd.arg(a);
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.cmd.args(args);
        self
    }

    pub fn env(mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) -> Self {
        self.cmd.env(k, v);
        self
    }

    /// Start the process without waiting for anything.
    pub fn start(mut self) -> Result<Child> {
        let child = self
            .cmd
            .spawn()
            .with_context(|| format!("starting {}", self.name))?;
        Ok(Child {
            name: self.name,
            child: Some(child),
        })
    }

    /// Start the process with `--listen`-style flags on port 0 and wait
    /// until it has announced `count` bound ports on stdout (see
    /// `edge::announce`); its other stdout lines go to the test's stdout.
    /// No port is chosen by the test, so none can be taken by another.
    pub fn start_announced(mut self, count: usize) -> Result<(Child, Bound)> {
        self.cmd.stdout(Stdio::piped());
        let mut child = self.start()?;
        let announced = child
            .child
            .as_mut()
            .and_then(|c| c.stdout.take())
            .map(|out| follow_stdout(out, None))
            .context("no stdout to read")?;
        let name = child.name.clone();
        let bound = wait_announced(&name, announced, count, || child.try_wait())?;
        Ok((child, bound))
    }

    /// Start the process and wait until it listens on `port`.
    pub fn start_listening(self, port: u16) -> Result<Child> {
        let mut child = self.start()?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if wait_for_port(port, Duration::from_millis(200)).is_ok() {
                return Ok(child);
            }
            if let Some(status) = child.try_wait()? {
                bail!(
                    "{} exited with {status} before listening on {port}",
                    child.name
                );
            }
            if Instant::now() > deadline {
                bail!("{} did not listen on {port} within 30s", child.name);
            }
        }
    }

    /// Run to completion, capturing output (for `--help` and bad-config checks).
    pub fn output(mut self) -> Result<std::process::Output> {
        self.cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        self.cmd
            .output()
            .with_context(|| format!("running {}", self.name))
    }
}

/// A running binary; killed (SIGKILL) when dropped so a failing test leaves
/// nothing behind.
pub struct Child {
    name: String,
    child: Option<std::process::Child>,
}

impl Child {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    pub fn try_wait(&mut self) -> Result<Option<std::process::ExitStatus>> {
        match self.child.as_mut() {
            Some(c) => Ok(c.try_wait()?),
            None => Ok(None),
        }
    }

    /// SIGKILL: the crash case.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then wait up to `timeout` for a clean exit; returns its status.
    pub fn terminate(&mut self, timeout: Duration) -> Result<std::process::ExitStatus> {
        let mut c = self.child.take().context("process already stopped")?;
        let pid = c.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status()?;
        exit_within(&mut c, timeout)
            .with_context(|| format!("{} did not exit within {timeout:?} of SIGTERM", self.name))
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Spawn {
    /// Send the process's stderr to `file` instead of the test's stderr, so
    /// a test can check what it logged.
    pub fn stderr_to(mut self, file: std::fs::File) -> Self {
        self.cmd.stderr(file);
        self
    }
}

/// Open `count` TCP connections to 127.0.0.1:`port` from the local address
/// `from` (any 127.x.y.z works on Linux loopback) and send nothing on them:
/// the idle clients of a connection-exhaustion attack.
pub async fn open_idle_connections(
    port: u16,
    count: usize,
    from: std::net::Ipv4Addr,
) -> Result<Vec<tokio::net::TcpStream>> {
    let target: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut open = Vec::with_capacity(count);
    for i in 0..count {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket
            .bind((from, 0).into())
            .with_context(|| format!("binding {from}"))?;
        let stream = tokio::time::timeout(Duration::from_secs(5), socket.connect(target))
            .await
            .with_context(|| format!("idle connection {i} to {target}: connect timed out"))?
            .with_context(|| format!("idle connection {i} to {target}"))?;
        open.push(stream);
    }
    Ok(open)
}

/// How many of `connections` the server has not closed by `deadline`
/// (closed: a read sees the end of the stream or an error).
pub async fn still_open_at(connections: Vec<tokio::net::TcpStream>, deadline: Instant) -> usize {
    use tokio::io::AsyncReadExt;
    let deadline = tokio::time::Instant::from_std(deadline);
    let waits = connections.into_iter().map(|mut stream| async move {
        let mut buf = [0u8; 64];
        loop {
            match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
                Err(_) => return true,
                Ok(Ok(0)) | Ok(Err(_)) => return false,
                // Server bytes (an HTTP/2 SETTINGS frame): keep waiting.
                Ok(Ok(_)) => {}
            }
        }
    });
    futures::future::join_all(waits)
        .await
        .into_iter()
        .filter(|open| *open)
        .count()
}

/// The ports a server announced it bound (`edge::announce`).
#[derive(Debug, Clone)]
pub struct Bound(pub Vec<edge::announce::Announcement>);

impl Bound {
    /// The port announced for `role` (`None`: the main one, announced with
    /// no role).
    pub fn port(&self, role: Option<&str>) -> u16 {
        self.addr(role).port()
    }

    pub fn addr(&self, role: Option<&str>) -> SocketAddr {
        let found = self.0.iter().find(|a| {
            let mut words = a.who.split(' ');
            let _program = words.next();
            words.next() == role
        });
        match found {
            Some(a) => a.addr,
            None => panic!("no port announced for role {role:?} in {:?}", self.0),
        }
    }
}

/// Read a child's stdout line by line on a thread of its own: each line is
/// appended to `sink` (or printed to the test's stdout), and each
/// announcement of a bound port is also sent on the returned channel.
pub fn follow_stdout(
    stdout: std::process::ChildStdout,
    sink: Option<std::fs::File>,
) -> std::sync::mpsc::Receiver<edge::announce::Announcement> {
    use std::io::{BufRead, Write};
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sink = sink;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            match sink.as_mut() {
                Some(file) => {
                    let _ = writeln!(file, "{line}");
                    let _ = file.flush();
                }
                None => println!("{line}"),
            }
            if let Some(a) = edge::announce::parse(&line) {
                let _ = tx.send(a);
            }
        }
    });
    rx
}

/// Wait (30 s at most) for `count` announcements, failing at once if the
/// process exits first.
pub fn wait_announced(
    name: &str,
    announced: std::sync::mpsc::Receiver<edge::announce::Announcement>,
    count: usize,
    mut exited: impl FnMut() -> Result<Option<std::process::ExitStatus>>,
) -> Result<Bound> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = Vec::new();
    while got.len() < count {
        match announced.recv_timeout(Duration::from_millis(100)) {
            Ok(a) => got.push(a),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Some(status) = exited()? {
                    bail!("{name} exited with {status} before announcing its ports ({got:?})");
                }
                if Instant::now() > deadline {
                    bail!("{name} did not announce {count} bound ports within 30s ({got:?})");
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                // Stdout closes as the process ends; give it a moment to be
                // reaped, so the error says how it exited.
                let reaped = Instant::now() + Duration::from_secs(5);
                while Instant::now() < reaped {
                    if let Some(status) = exited()? {
                        bail!("{name} exited with {status} before announcing its ports ({got:?})");
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                bail!("{name} closed its stdout before announcing its ports ({got:?})");
            }
        }
    }
    Ok(Bound(got))
}

/// Run workspace binary `bin` with `args` to completion under
/// `strace -f -e trace=bind`, so every `bind(2)` any of its threads made is
/// on record; return (success, stderr, every `bind` of an internet socket).
///
/// For "refused before binding" checks: looking at the port once the
/// process has exited proves nothing (the kernel frees it with the
/// process); the trace shows whether anything was ever bound. Start the
/// binary with `--listen 127.0.0.1:0`: no port needs to be known.
pub fn run_tracing_binds(
    bin: &str,
    args: &[&std::ffi::OsStr],
) -> Result<(bool, String, Vec<String>)> {
    let strace = ["/usr/bin/strace", "/bin/strace"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .context(
            "strace is not installed: \"refused before binding\" is proven by \
             tracing bind(2); run scripts/install-test-deps.sh",
        )?;
    let dir = tempfile::tempdir()?;
    let trace = dir.path().join("bind.trace");
    let out = Command::new(strace)
        .args(["-f", "-e", "trace=bind", "-o"])
        .arg(&trace)
        .arg(bin_path(bin))
        .args(args)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {bin} under strace"))?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let trace = std::fs::read_to_string(&trace)
        .with_context(|| format!("strace wrote no trace; its stderr: {stderr}"))?;
    if !trace.contains("+++ exited with") {
        bail!("the trace does not cover the whole run:\n{trace}\n{stderr}");
    }
    let binds = trace
        .lines()
        .filter(|l| l.contains("bind(") && (l.contains("AF_INET") || l.contains("sin_port")))
        .map(str::to_string)
        .collect();
    Ok((out.status.success(), stderr, binds))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every port handed out lies outside the kernel's ephemeral range (so
    /// no `bind` to port 0 or outgoing connection can take it), can be
    /// bound, and is handed out once.
    #[test]
    fn free_ports_are_outside_the_ephemeral_range_and_handed_out_once() {
        let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .expect("Linux's ephemeral port range");
        let bounds: Vec<u16> = text
            .split_whitespace()
            .map(|b| b.parse().expect("a port"))
            .collect();
        let ephemeral = bounds[0]..=bounds[1];
        let ports: Vec<u16> = (0..20).map(|_| free_port()).collect();
        for port in &ports {
            assert!(
                !ephemeral.contains(port),
                "{port} is in the ephemeral range {ephemeral:?}"
            );
            TcpListener::bind(("127.0.0.1", *port)).expect("a free port binds");
        }
        let distinct: std::collections::BTreeSet<&u16> = ports.iter().collect();
        assert_eq!(distinct.len(), ports.len(), "handed out twice: {ports:?}");
    }
}
