//! TCP keepalive and `TCP_USER_TIMEOUT` on the sockets of PostgreSQL sessions (the compute host's and the
//! proxy's, both legs), so a peer that vanished without a FIN or RST (a host powered off, a network cut) is
//! found in bounded time and its session ends: its transaction is rolled back and the database's write lock it
//! held is let go, instead of every other writer waiting for `idle_in_transaction_session_timeout` (10 min by
//! default) or the kernel's retransmissions (~15 min).
//!
//! A peer that is merely idle, or slow to read a long result, keeps its kernel answering the probes and
//! acknowledging data, so it is never cut by this.

use std::time::Duration;

/// Keepalive probes start after this much silence on the connection…
pub const KEEPALIVE_IDLE_MS: u64 = 10_000;
/// …then one every this long…
pub const KEEPALIVE_INTERVAL_MS: u64 = 5_000;
/// …and the connection is closed after this many unanswered ones (an idle dead peer found in ~25 s).
pub const KEEPALIVE_RETRIES: u32 = 3;
/// Data sent may stay unacknowledged this long before the connection is closed (a dead peer found while a
/// result is being sent to it).
pub const USER_TIMEOUT_MS: u64 = 30_000;

/// Sets keepalive and the user timeout on `socket` (see the module doc).
pub fn configure(socket: &tokio::net::TcpStream) -> std::io::Result<()> {
    let socket = socket2::SockRef::from(socket);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_millis(KEEPALIVE_IDLE_MS))
        .with_interval(Duration::from_millis(KEEPALIVE_INTERVAL_MS))
        .with_retries(KEEPALIVE_RETRIES);
    socket.set_tcp_keepalive(&keepalive)?;
    socket.set_tcp_user_timeout(Some(Duration::from_millis(USER_TIMEOUT_MS)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_configured_socket_probes_and_times_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let client = tokio::net::TcpStream::connect(address).await.expect("connect");
        configure(&client).expect("configure");
        let socket = socket2::SockRef::from(&client);
        assert!(socket.keepalive().expect("SO_KEEPALIVE"));
        assert_eq!(
            socket.tcp_keepalive_time().expect("TCP_KEEPIDLE"),
            Duration::from_millis(KEEPALIVE_IDLE_MS)
        );
        assert_eq!(
            socket.tcp_keepalive_interval().expect("TCP_KEEPINTVL"),
            Duration::from_millis(KEEPALIVE_INTERVAL_MS)
        );
        assert_eq!(socket.tcp_keepalive_retries().expect("TCP_KEEPCNT"), KEEPALIVE_RETRIES);
        assert_eq!(
            socket.tcp_user_timeout().expect("TCP_USER_TIMEOUT"),
            Some(Duration::from_millis(USER_TIMEOUT_MS))
        );
    }
}
