//! TCP keepalive and `TCP_USER_TIMEOUT` on the sockets of PostgreSQL sessions (the compute host's and the
//! proxy's, both legs), so a peer that vanished without a FIN or RST (a host powered off, a network cut) is
//! found in bounded time and its session ends: its transaction is rolled back and the database's write lock it
//! held is let go, instead of every other writer waiting for `idle_in_transaction_session_timeout` (10 min by
//! default) or the kernel's retransmissions (~15 min).
//!
//! A peer that is merely idle, or slow to read a long result, keeps its kernel answering the probes and
//! acknowledging data, so it is never cut by this.
//!
//! Also `TCP_NODELAY`, as PostgreSQL sets on its backends' sockets (and PgBouncer on both legs): the replies are
//! already written once per round trip (`frames` holds them until the client's messages are answered), so
//! Nagle's algorithm could only hold back the tail of a long reply until the client's (possibly delayed)
//! acknowledgement of its start: an extra round trip, or the 40 ms of a delayed ACK, on a real network.

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

/// Sets keepalive, the user timeout and `TCP_NODELAY` on `socket` (see the module doc).
pub fn configure(socket: &tokio::net::TcpStream) -> std::io::Result<()> {
    socket.set_nodelay(true)?;
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
    async fn a_configured_socket_probes_times_out_and_sends_at_once() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let client = tokio::net::TcpStream::connect(address).await.expect("connect");
        configure(&client).expect("configure");
        assert!(client.nodelay().expect("TCP_NODELAY"));
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
