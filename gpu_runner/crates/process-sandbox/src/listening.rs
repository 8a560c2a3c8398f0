//! What a process tree listens on: every TCP socket in LISTEN state and
//! every bound UDP socket of a set of processes, read from Linux's
//! `/proc` (docs/limits.md "Loopback only").
//!
//! The suite opens its own sockets on 127.0.0.1 or `ipc://` only, and
//! launches gateways and engines told to do the same (`--host 127.0.0.1`,
//! `--prometheus-host 127.0.0.1`, `--data-parallel-address 127.0.0.1`); a
//! peer that listens on any other address would expose the machine the
//! suite runs on. `/proc/net/{tcp,tcp6,udp,udp6}` list sockets by inode
//! with their local address (hex, the IPv4 address a little-endian word,
//! IPv6 four such words; the port big-endian) and state (`0A` = LISTEN);
//! `/proc/<pid>/fd/*` link to `socket:[<inode>]` for the sockets a process
//! holds (proc(5)).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// One listening socket: where, and which process holds it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Listener {
    pub addr: SocketAddr,
    /// `tcp` or `udp`.
    pub proto: &'static str,
    pub pid: u32,
}

impl std::fmt::Display for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} (pid {})", self.proto, self.addr, self.pid)
    }
}

/// `pid` and every process descended from it.
pub fn process_tree(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else { continue };
            // `pid (comm) state ppid ...`: comm may hold spaces and parens.
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
            if let Some(ppid) = after.split_whitespace().nth(1).and_then(|s| s.parse().ok()) {
                parents.push((p, ppid));
            }
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    tree
}

/// The socket inodes `pid` holds open.
fn socket_inodes(pid: u32) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for e in dir.flatten() {
            if let Ok(target) = std::fs::read_link(e.path()) {
                let t = target.to_string_lossy();
                if let Some(n) = t.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']')) {
                    if let Ok(n) = n.parse() {
                        out.insert(n);
                    }
                }
            }
        }
    }
    out
}

/// A `/proc/net` local address (`0100007F:1F90`, or 32 hex digits for
/// IPv6).
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(u32::from_str_radix(ip, 16).ok()?.swap_bytes())),
        32 => {
            let mut bytes = [0u8; 16];
            for (w, chunk) in ip.as_bytes().chunks(8).enumerate() {
                let word = u32::from_str_radix(std::str::from_utf8(chunk).ok()?, 16).ok()?;
                bytes[w * 4..w * 4 + 4].copy_from_slice(&word.to_le_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The listening sockets of `pids`: TCP in LISTEN state, UDP bound.
pub fn listeners(pids: &[u32]) -> Vec<Listener> {
    let mut owner = std::collections::BTreeMap::new();
    for &pid in pids {
        for inode in socket_inodes(pid) {
            owner.entry(inode).or_insert(pid);
        }
    }
    let mut out = Vec::new();
    for (file, proto) in [("tcp", "tcp"), ("tcp6", "tcp"), ("udp", "udp"), ("udp6", "udp")] {
        let Ok(table) = std::fs::read_to_string(format!("/proc/net/{file}")) else { continue };
        for line in table.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (cols.get(1), cols.get(3), cols.get(9)) else { continue };
            let listening = if proto == "tcp" { *state == "0A" } else { true };
            let Some(&pid) = inode.parse::<u64>().ok().and_then(|i| owner.get(&i)) else { continue };
            if let (true, Some(addr)) = (listening, parse_addr(local)) {
                out.push(Listener { addr, proto, pid });
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The listeners of `pids` on anything but a loopback address.
pub fn beyond_loopback(pids: &[u32]) -> Vec<Listener> {
    listeners(pids).into_iter().filter(|l| !is_loopback(l.addr.ip())).collect()
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_addresses_read_as_linux_writes_them() {
        assert_eq!(parse_addr("0100007F:1F90"), Some("127.0.0.1:8080".parse().unwrap()));
        assert_eq!(parse_addr("00000000:0050"), Some("0.0.0.0:80".parse().unwrap()));
        assert_eq!(parse_addr("00000000000000000000000001000000:0016"), Some("[::1]:22".parse().unwrap()));
        assert_eq!(parse_addr("0000000000000000FFFF00000100007F:0016"), Some("[::ffff:127.0.0.1]:22".parse().unwrap()));
        assert_eq!(parse_addr("zz"), None);
    }

    #[test]
    fn a_listener_on_every_address_is_caught_and_one_on_loopback_is_not() {
        let me = std::process::id();
        let local = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local_addr = local.local_addr().unwrap();
        let all = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
        let all_port = all.local_addr().unwrap().port();
        let ls = listeners(&[me]);
        assert!(ls.iter().any(|l| l.addr == local_addr), "{ls:?}");
        let bad = beyond_loopback(&[me]);
        assert!(bad.iter().any(|l| l.addr.port() == all_port && l.pid == me), "{bad:?}");
        assert!(!bad.iter().any(|l| l.addr == local_addr), "{bad:?}");
        drop(all);
        assert!(!beyond_loopback(&[me]).iter().any(|l| l.addr.port() == all_port));
    }

    #[test]
    fn a_childs_listener_belongs_to_the_tree() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let tree = process_tree(std::process::id());
        assert!(tree.contains(&child.id()), "{tree:?}");
        let _ = child.kill();
        let _ = child.wait();
    }
}
