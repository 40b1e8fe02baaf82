//! Which `Host` headers the HTTP server answers: loopback names always,
//! the address it is bound to, and the hosts the user names. A request
//! naming any other host is refused, which is what stops DNS rebinding.

use std::net::{IpAddr, SocketAddr};

/// The allowed hosts (without ports: any port matches) for a server bound
/// at `bound`, plus `extra` from `--allowed-host`.
pub(super) fn allowed(bound: SocketAddr, extra: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"]
        .into_iter()
        .map(String::from)
        .collect();
    let ip = bound.ip();
    if ip.is_unspecified() {
        // Bound to every interface: each of this machine's addresses, and
        // its name, is the bound address.
        hosts.extend(local_addresses().iter().map(IpAddr::to_string));
        hosts.extend(host_name());
    } else if !ip.is_loopback() {
        hosts.push(ip.to_string());
    }
    hosts.extend(extra.iter().map(|h| normalize(h)));
    let mut seen = std::collections::BTreeSet::new();
    hosts.retain(|h| !h.is_empty() && seen.insert(h.clone()));
    hosts
}

/// A host as the user wrote it, without brackets, in lower case.
fn normalize(host: &str) -> String {
    host.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// This machine's name, as `gethostname` gives it.
fn host_name() -> Option<String> {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is valid for its whole length, and gethostname
    // writes at most that many bytes.
    let status = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if status != 0 {
        return None;
    }
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    let name = std::str::from_utf8(&buffer[..end])
        .ok()?
        .to_ascii_lowercase();
    (!name.is_empty()).then_some(name)
}

/// Every IPv4 and IPv6 address of this machine's interfaces.
fn local_addresses() -> Vec<IpAddr> {
    let mut addresses = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list that stays valid
    // until freeifaddrs; each node's address is read by its family.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return addresses;
        }
        let mut node = list;
        while !node.is_null() {
            let address = (*node).ifa_addr;
            if !address.is_null() {
                match i32::from((*address).sa_family) {
                    libc::AF_INET => {
                        let v4 = &*(address as *const libc::sockaddr_in);
                        addresses
                            .push(IpAddr::from(u32::from_be(v4.sin_addr.s_addr).to_be_bytes()));
                    }
                    libc::AF_INET6 => {
                        let v6 = &*(address as *const libc::sockaddr_in6);
                        addresses.push(IpAddr::from(v6.sin6_addr.s6_addr));
                    }
                    _ => {}
                }
            }
            node = (*node).ifa_next;
        }
        libc::freeifaddrs(list);
    }
    addresses.sort();
    addresses.dedup();
    addresses
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_binds_allow_loopback_names_and_named_hosts_only() {
        let hosts = allowed("127.0.0.1:8765".parse().unwrap(), &["Wiki.Example".into()]);
        assert_eq!(hosts, ["localhost", "127.0.0.1", "::1", "wiki.example"]);
    }

    #[test]
    fn a_specific_address_is_allowed() {
        let hosts = allowed("10.1.2.3:80".parse().unwrap(), &["[fe80::1]".into()]);
        assert_eq!(
            hosts,
            ["localhost", "127.0.0.1", "::1", "10.1.2.3", "fe80::1"]
        );
    }

    #[test]
    fn every_interface_address_is_allowed_for_an_unspecified_bind() {
        let hosts = allowed("0.0.0.0:80".parse().unwrap(), &[]);
        for address in local_addresses() {
            assert!(
                hosts.contains(&address.to_string()),
                "{address} in {hosts:?}"
            );
        }
        assert!(local_addresses().iter().any(IpAddr::is_loopback));
    }
}
