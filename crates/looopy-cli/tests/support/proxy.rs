//! A loopback TCP relay a test controls: it forwards every connection to a target
//! (PostgreSQL, NATS) until told to cut — then it closes every open connection and refuses
//! new ones until restored. How the replica tests take a database or a bus away from one
//! process without touching the others.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// A TCP relay to `target` that can cut every connection and refuse (close) new ones.
pub struct CutProxy {
    /// Where clients connect (`127.0.0.1:PORT`).
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<AbortHandle>>>,
    accept: AbortHandle,
}

impl CutProxy {
    /// Listens on a free loopback port and relays to `target` (`host:port`).
    pub async fn start(target: String) -> CutProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let links = Arc::new(Mutex::new(Vec::<AbortHandle>::new()));
        let accept = tokio::spawn({
            let cut = Arc::clone(&cut);
            let links = Arc::clone(&links);
            async move {
                while let Ok((mut client, _)) = listener.accept().await {
                    if cut.load(Ordering::SeqCst) {
                        continue; // dropped: the client sees the connection closed
                    }
                    let target = target.clone();
                    let link = tokio::spawn(async move {
                        if let Ok(mut server) = TcpStream::connect(&target).await {
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                        }
                    });
                    let mut links = links.lock().unwrap();
                    links.retain(|l| !l.is_finished());
                    links.push(link.abort_handle());
                    if cut.load(Ordering::SeqCst) {
                        link.abort(); // cut while this one was being set up
                    }
                }
            }
        })
        .abort_handle();
        CutProxy {
            addr,
            cut,
            links,
            accept,
        }
    }

    /// Closes every open connection and refuses new ones until [`CutProxy::restore`].
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }

    /// Relays new connections again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }

    /// Whether the relay is cut.
    pub fn is_cut(&self) -> bool {
        self.cut.load(Ordering::SeqCst)
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}
