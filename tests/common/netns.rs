//! Hosts on one machine (issue 17 item 5): each a network namespace with its own address, joined by a bridge in
//! the test's own namespace (which holds the bridge's address, so the test reaches every host), made and
//! removed by the test with `ip` (iproute2) and nothing else.
//!
//! A partition between two hosts is silent, as a real one is: each side's neighbour entry for the other is
//! pinned to a MAC address no host has, so the frames go nowhere, TCP retransmits into the void, and nothing
//! tells the sender (no RST, no ICMP, no error from `send`). Healing deletes the pinned entries; the next ARP
//! finds the real host and the retransmissions get through. (This machine's kernel has neither `netem` nor
//! netfilter; a blackhole route is not silent: local senders get EINVAL at once.)
//!
//! Where namespaces cannot be made (not root, no iproute2, a container without the capability), [`Net::create`]
//! says why and the tests skip with that message.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The first two octets of every test network; the third is the network's index in this process.
const PREFIX: &str = "10.213";
/// A MAC address no host has: where a partitioned host's frames go.
const NOWHERE_MAC: &str = "02:00:00:00:00:99";
/// Networks made by this process so far (names and subnets are unique within the process; test binaries run one
/// at a time).
static NETS_MADE: AtomicU32 = AtomicU32::new(0);

/// One host: a namespace and its address on the network.
#[derive(Clone, Debug)]
pub struct Host {
    /// The short name the test gave it.
    pub name: String,
    /// The namespace's name.
    pub netns: String,
    /// Its IPv4 address.
    pub ip: String,
}

/// Namespaces joined by a bridge; removed when dropped (kill the processes in them first).
#[derive(Debug)]
pub struct Net {
    bridge: String,
    /// The test's own address on the network (the bridge's), which every host reaches.
    gateway_ip: String,
    hosts: Vec<Host>,
}

/// Runs `ip <args>`; the error says what failed.
fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// Whether `subnet` (`a.b.c.`) is on an interface of the test's namespace already (left by a crashed run).
fn subnet_in_use(subnet: &str) -> bool {
    Command::new("ip")
        .args(["-o", "-4", "addr", "show"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(&format!(" {subnet}")))
        .unwrap_or(false)
}

impl Net {
    /// Makes a network of hosts named `names` (addresses `.1`, `.2`, … in order; the test's side `.254`).
    /// `Err` with the reason if namespaces cannot be made here.
    pub fn create(names: &[&str]) -> Result<Net, String> {
        assert!(!names.is_empty() && names.len() < 200, "1 to 199 hosts");
        let pid = std::process::id() % 100_000;
        let (index, subnet) = loop {
            let index = NETS_MADE.fetch_add(1, Ordering::Relaxed);
            assert!(index < 250, "more test networks than subnets");
            let subnet = format!("{PREFIX}.{index}.");
            if !subnet_in_use(&subnet) {
                break (index, subnet);
            }
        };
        let bridge = format!("cbr{pid}n{index}");
        let mut net = Net {
            bridge: bridge.clone(),
            gateway_ip: format!("{subnet}254"),
            hosts: Vec::new(),
        };
        // From here on, `Drop` removes whatever was made.
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&["addr", "add", &format!("{subnet}254/24"), "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        for (i, name) in names.iter().enumerate() {
            let netns = format!("cb{pid}n{index}{name}");
            let outside = format!("cv{pid}n{index}h{i}");
            let inside = format!("{outside}i");
            ip(&["netns", "add", &netns])?;
            let host = Host {
                name: (*name).to_owned(),
                netns: netns.clone(),
                ip: format!("{subnet}{}", i + 1),
            };
            net.hosts.push(host.clone());
            ip(&["link", "add", &outside, "type", "veth", "peer", "name", &inside])?;
            ip(&["link", "set", &inside, "netns", &netns])?;
            ip(&["-n", &netns, "link", "set", &inside, "name", "eth0"])?;
            ip(&["-n", &netns, "addr", "add", &format!("{}/24", host.ip), "dev", "eth0"])?;
            ip(&["-n", &netns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &netns, "link", "set", "lo", "up"])?;
            ip(&["link", "set", &outside, "master", &bridge])?;
            ip(&["link", "set", &outside, "up"])?;
        }
        Ok(net)
    }

    /// The test's own address on the network: processes the test starts outside every namespace listen on it
    /// to be reached from the hosts (a partition never cuts it).
    pub fn gateway_ip(&self) -> &str {
        &self.gateway_ip
    }

    /// The host named `name`.
    pub fn host(&self, name: &str) -> &Host {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .unwrap_or_else(|| panic!("no host {name}"))
    }

    /// Cuts `a` and `b` apart, both ways, silently.
    pub fn partition(&self, a: &str, b: &str) {
        let (a, b) = (self.host(a), self.host(b));
        for (from, to) in [(a, b), (b, a)] {
            ip(&[
                "-n",
                &from.netns,
                "neigh",
                "replace",
                &to.ip,
                "lladdr",
                NOWHERE_MAC,
                "dev",
                "eth0",
                "nud",
                "permanent",
            ])
            .expect("pin the neighbour entry");
        }
    }

    /// Joins `a` and `b` again.
    pub fn heal(&self, a: &str, b: &str) {
        let (a, b) = (self.host(a), self.host(b));
        for (from, to) in [(a, b), (b, a)] {
            ip(&["-n", &from.netns, "neigh", "del", &to.ip, "dev", "eth0"]).expect("unpin the neighbour entry");
        }
    }

    /// Cuts `name` from every other host (the test still reaches it).
    pub fn isolate(&self, name: &str) {
        for other in self.others(name) {
            self.partition(name, &other);
        }
    }

    /// Joins `name` to every other host again.
    pub fn rejoin(&self, name: &str) {
        for other in self.others(name) {
            self.heal(name, &other);
        }
    }

    fn others(&self, name: &str) -> Vec<String> {
        self.hosts
            .iter()
            .filter(|h| h.name != name)
            .map(|h| h.name.clone())
            .collect()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting a namespace destroys the veth end inside it, and so its peer on the bridge.
        for host in &self.hosts {
            if let Err(error) = ip(&["netns", "del", &host.netns]) {
                eprintln!("removing a test namespace: {error}");
            }
        }
        if let Err(error) = ip(&["link", "del", &self.bridge]) {
            eprintln!("removing the test bridge: {error}");
        }
    }
}
