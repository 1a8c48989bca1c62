//! A MongoDB-compatible server for the MongoDB store's tests: SecantusDB
//! (`secantusd-py`, installed by `scripts/install-test-deps.sh`), run as a
//! separate process on a free loopback port with its own data directory.
//!
//! Located through `$SECANTUSD`, else `<workspace>/build/venv/bin/secantusd-py`.
//! A missing server fails the test (it never skips silently).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::process::{free_port, listening_pids, wait_for_port};

/// Path of the SecantusDB launcher; panics with the fix if it is missing.
pub fn secantusd_path() -> PathBuf {
    let path = std::env::var_os("SECANTUSD")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../build/venv/bin/secantusd-py")
        });
    assert!(
        path.exists(),
        "SecantusDB (MongoDB-compatible test server) not found at {}: run scripts/install-test-deps.sh \
         (or point $SECANTUSD at secantusd-py)",
        path.display()
    );
    path
}

/// What [`MongoServer::dump`] read.
pub struct Dump {
    /// `(collection, document)`, documents as relaxed extended JSON.
    pub docs: Vec<(String, serde_json::Value)>,
    /// Every document's raw BSON, concatenated.
    pub raw: Vec<u8>,
}

/// A running SecantusDB server; killed when dropped. Its data directory
/// lives as long as this value, so it can be stopped and restarted.
pub struct MongoServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<std::process::Child>,
    /// Start with mongod's test-only commands (`configureFailPoint`).
    test_commands: bool,
    /// The `appName` [`MongoServer::uri`] gives its clients, if any.
    app_name: Option<String>,
}

impl MongoServer {
    /// Start a fresh server on a free port.
    pub fn start() -> Result<Self> {
        let dir = tempfile::tempdir().context("temp dir for SecantusDB")?;
        let mut server = MongoServer {
            // A known port, deliberately: the server is restarted on it
            // (its clients, the catalogs under test, know it by URL), and
            // SecantusDB does not announce a port it chose.
            port: free_port(),
            dir,
            child: None,
            test_commands: false,
            app_name: None,
        };
        server.restart()?;
        Ok(server)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connection string for the official driver.
    pub fn uri(&self) -> String {
        let uri = format!("mongodb://127.0.0.1:{}/?directConnection=true", self.port);
        match &self.app_name {
            Some(app) => format!("{uri}&appName={app}"),
            None => uri,
        }
    }

    /// Name the clients given [`MongoServer::uri`] from now on `app` (the
    /// connection string's `appName`, an operator's setting the server
    /// sees in each connection's handshake and a failpoint can be scoped
    /// to); `None`: unnamed again.
    pub fn name_clients(&mut self, app: Option<&str>) {
        self.app_name = app.map(str::to_string);
    }

    /// Enable mongod's test-only commands (`configureFailPoint`) from the
    /// next [`MongoServer::restart`] on.
    pub fn enable_test_commands(&mut self) {
        self.test_commands = true;
    }

    /// Arm mongod's `failCommand` failpoint (`mode`, `data` as mongod
    /// takes them; see SecantusDB's `failpoints.py`), through pymongo.
    /// Needs [`MongoServer::enable_test_commands`].
    pub fn fail_command(&self, mode: serde_json::Value, data: serde_json::Value) -> Result<()> {
        const SCRIPT: &str = r#"
import sys, json, pymongo
client = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=20000)
client.admin.command({"configureFailPoint": "failCommand",
    "mode": json.loads(sys.argv[2]), "data": json.loads(sys.argv[3])})
"#;
        self.python(
            "configureFailPoint",
            SCRIPT,
            &[&mode.to_string(), &data.to_string()],
        )?;
        Ok(())
    }

    /// Run `script` with the Python beside SecantusDB (pymongo installed),
    /// given this server's URI and then `args`; its stdout. `what` names
    /// it in an error.
    fn python(&self, what: &str, script: &str, args: &[&str]) -> Result<Vec<u8>> {
        let python = secantusd_path().with_file_name("python");
        let out = Command::new(&python)
            .args(["-c", script, &self.uri()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {}", python.display()))?;
        if !out.status.success() {
            bail!("{what}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(out.stdout)
    }

    /// (Re)start the server on the same port and data directory.
    pub fn restart(&mut self) -> Result<()> {
        if self.child.is_some() {
            bail!("SecantusDB is already running");
        }
        let mut child = Command::new(secantusd_path())
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &self.port.to_string(),
                "--log-level",
                "WARNING",
            ])
            .arg("--storage-path")
            .arg(self.dir.path().join("db"))
            .args(self.test_commands.then_some("--enable-test-commands"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting secantusd-py")?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if wait_for_port(self.port, Duration::from_millis(200)).is_ok() {
                // Whatever answers must be this child: a port picked in
                // advance can be taken by another process meanwhile, and a
                // test would then run against a stranger.
                let holders = listening_pids(self.port);
                if holders.contains(&child.id()) {
                    break;
                }
                if let Some(status) = child.try_wait()? {
                    bail!(
                        "secantusd-py exited with {status}: port {} is held by process(es) {holders:?}",
                        self.port
                    );
                }
            }
            if let Some(status) = child.try_wait()? {
                bail!(
                    "secantusd-py exited with {status} before listening on {}",
                    self.port
                );
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "secantusd-py did not listen on {} within 60s (listening there: {:?})",
                    self.port,
                    listening_pids(self.port)
                );
            }
        }
        self.child = Some(child);
        Ok(())
    }

    /// Every document of every collection of `database`, read with pymongo
    /// (installed beside SecantusDB): `(collection, document)` as relaxed
    /// extended JSON, and all documents' raw BSON bytes concatenated (for
    /// searching stored bytes, binary fields included).
    pub fn dump(&self, database: &str) -> Result<Dump> {
        const SCRIPT: &str = r#"
import sys, json, bson, pymongo
from bson import json_util
client = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=20000)
db = client[sys.argv[2]]
for name in sorted(db.list_collection_names()):
    for doc in db[name].find():
        raw = bson.encode(doc).hex()
        doc = json.loads(json_util.dumps(doc, json_options=json_util.RELAXED_JSON_OPTIONS))
        print(json.dumps({"c": name, "doc": doc, "raw": raw}))
"#;
        let stdout = self.python(&format!("dumping {database}"), SCRIPT, &[database])?;
        let mut docs = Vec::new();
        let mut raw = Vec::new();
        for line in String::from_utf8_lossy(&stdout).lines() {
            let v: serde_json::Value = serde_json::from_str(line).context("dump line")?;
            let hex = v["raw"].as_str().unwrap_or_default();
            for i in (0..hex.len()).step_by(2) {
                raw.push(u8::from_str_radix(&hex[i..i + 2], 16).context("dump hex")?);
            }
            docs.push((
                v["c"].as_str().unwrap_or_default().to_string(),
                v["doc"].clone(),
            ));
        }
        Ok(Dump { docs, raw })
    }

    /// Process id of the running server, if it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Freeze the server (SIGSTOP): its port still accepts connections,
    /// but nothing is answered until [`MongoServer::thaw`] — a hung
    /// database, not a dead one.
    pub fn freeze(&self) -> Result<()> {
        self.signal("STOP")
    }

    /// Resume a frozen server (SIGCONT).
    pub fn thaw(&self) -> Result<()> {
        self.signal("CONT")
    }

    fn signal(&self, name: &str) -> Result<()> {
        let Some(pid) = self.pid() else {
            bail!("SecantusDB is not running");
        };
        let status = Command::new("kill")
            .args([&format!("-{name}"), &pid.to_string()])
            .status()
            .context("running kill")?;
        if !status.success() {
            bail!("kill -{name} {pid} failed: {status}");
        }
        Ok(())
    }

    /// Stop the server, throw its data away and start it again, empty, on
    /// the same port: what a client sees when the database is replaced
    /// (its change-stream history included).
    pub fn restart_empty(&mut self) -> Result<()> {
        self.stop();
        let db = self.dir.path().join("db");
        if db.exists() {
            std::fs::remove_dir_all(&db).context("removing SecantusDB's data")?;
        }
        self.restart()
    }

    /// Stop the server (SIGTERM, then SIGKILL after a few seconds); its data
    /// stays for [`MongoServer::restart`].
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for MongoServer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // A frozen server would hold its port until reaped; SIGKILL
            // works on a stopped process.
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
