//! A TCP proxy on loopback in front of a server, whose replies can be held back and whose
//! connections can be cut: a write that reaches the server and is applied, while its reply
//! never reaches the client (which then retries on a new connection).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The proxy: its address, and its switches.
pub struct Proxy {
    pub port: u16,
    hold: Arc<AtomicBool>,
    /// Connections older than this generation are closed.
    cut: Arc<AtomicU64>,
}

impl Proxy {
    /// A proxy to the server on `127.0.0.1:target`.
    pub async fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hold = Arc::new(AtomicBool::new(false));
        let cut = Arc::new(AtomicU64::new(0));
        let (h, c) = (hold.clone(), cut.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else {
                    continue;
                };
                let born = c.load(Ordering::SeqCst);
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let alive = {
                    let c = c.clone();
                    move || c.load(Ordering::SeqCst) == born
                };
                let up = {
                    let alive = alive.clone();
                    async move {
                        let mut buf = vec![0u8; 64 << 10];
                        while alive() {
                            let read = tokio::time::timeout(
                                std::time::Duration::from_millis(10),
                                client_read.read(&mut buf),
                            )
                            .await;
                            match read {
                                Ok(Ok(0)) | Ok(Err(_)) => break,
                                Ok(Ok(n)) => {
                                    if server_write.write_all(&buf[..n]).await.is_err() {
                                        break;
                                    }
                                }
                                Err(_) => {}
                            }
                        }
                    }
                };
                let hold = h.clone();
                let alive = alive.clone();
                let down = async move {
                    let mut buf = vec![0u8; 64 << 10];
                    while alive() {
                        let read = tokio::time::timeout(
                            std::time::Duration::from_millis(10),
                            server_read.read(&mut buf),
                        )
                        .await;
                        match read {
                            Ok(Ok(0)) | Ok(Err(_)) => break,
                            // Held: the reply is dropped, and the connection cut later.
                            Ok(Ok(_)) if hold.load(Ordering::SeqCst) || !alive() => {}
                            Ok(Ok(n)) => {
                                if client_write.write_all(&buf[..n]).await.is_err() {
                                    break;
                                }
                            }
                            Err(_) => {}
                        }
                    }
                };
                tokio::spawn(async move {
                    tokio::join!(up, down);
                });
            }
        });
        Proxy { port, hold, cut }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Replies from now on are dropped (until [`cut`](Proxy::cut)).
    pub fn hold(&self) {
        self.hold.store(true, Ordering::SeqCst);
    }

    /// Every connection so far is closed, and replies flow again on new ones.
    pub fn cut(&self) {
        self.cut.fetch_add(1, Ordering::SeqCst);
        self.hold.store(false, Ordering::SeqCst);
    }
}
