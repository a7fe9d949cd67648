//! A real NATS server with JetStream for one test: started on a free
//! loopback port with its file storage in a temporary folder, stopped by
//! its PID when dropped. The binary is the one `scripts/test` installs
//! (`scripts/test-deps-nats`, into `.ci/nats`), or `CADRE_NATS_SERVER`.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// The nats-server binary, or a panic that says how to get it.
pub fn nats_server_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("CADRE_NATS_SERVER") {
        return PathBuf::from(p);
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/nats/nats-server");
    assert!(
        p.exists(),
        "{} is missing: run scripts/test (it runs scripts/test-deps-nats, which installs \
         nats-server into .ci/nats), or set CADRE_NATS_SERVER to a nats-server binary",
        p.display()
    );
    p
}

pub struct NatsServer {
    child: Option<Child>,
    pub port: u16,
    /// JetStream's storage; kept across a restart.
    pub store: TempDir,
    log: PathBuf,
}

impl NatsServer {
    pub fn start() -> NatsServer {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let store = tempfile::tempdir().unwrap();
        let log = store.path().join("server.log");
        let mut s = NatsServer {
            child: None,
            port,
            store,
            log,
        };
        s.launch();
        s
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again, after [`NatsServer::kill`]) on its port
    /// and store.
    pub fn launch(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(nats_server_binary())
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(self.store.path().join("js"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting nats-server: {e}"));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok()
                && std::fs::read_to_string(&self.log)
                    .unwrap_or_default()
                    .matches("Server is ready")
                    .count()
                    >= self.launches()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "nats-server did not start on port {}: {}",
                self.port,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn launches(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .matches("Starting nats-server")
            .count()
            .max(1)
    }

    /// The server's log so far (for assertion messages).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Kills the server (SIGKILL, by PID) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = c.wait();
        }
    }

    /// Kills the server and starts it again on the same port and storage.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}
