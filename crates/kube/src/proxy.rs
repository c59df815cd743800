//! The apiserver's proxy, chosen as kubectl chooses it.
//!
//! Why: kube-rs takes `HTTPS_PROXY` from the environment for every cluster
//! and, in this build (without its `http-proxy` feature), then refuses to
//! build a client at all. With a proxy in the environment, common in
//! corporate clusters, every command and hook failed, even against an
//! apiserver on loopback or one `NO_PROXY` names. kubectl (Go's
//! `ProxyFromEnvironment`) never proxies loopback and skips the hosts of
//! `NO_PROXY`; [`infer`] does the same. A proxy named in the kubeconfig
//! (`proxy-url`) is kept as it is, as kubectl keeps it.

use std::net::IpAddr;

/// `kube::Config::infer`, without the environment's proxy for a cluster
/// that loopback or `NO_PROXY` exempts.
pub async fn infer() -> Result<kube::Config, kube::config::InferConfigError> {
    let mut config = kube::Config::infer().await?;
    let from_env = env_proxy();
    let no_proxy = std::env::var("NO_PROXY")
        .ok()
        .filter(|v| !v.is_empty())
        .or_else(|| std::env::var("no_proxy").ok())
        .unwrap_or_default();
    let proxy = config.proxy_url.as_ref().map(ToString::to_string);
    let host = config.cluster_url.host().unwrap_or_default().to_owned();
    if proxy.is_some()
        && proxy == from_env
        && bypass(&host, config.cluster_url.port_u16(), &no_proxy)
    {
        config.proxy_url = None;
    }
    Ok(config)
}

/// The environment's proxy as kube-rs reads it (`HTTPS_PROXY`, then
/// `https_proxy`), normalised as a URI prints it.
fn env_proxy() -> Option<String> {
    ["HTTPS_PROXY", "https_proxy"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.is_empty())
        .and_then(|v| v.parse::<http::Uri>().ok())
        .map(|u| u.to_string())
}

/// Pure: whether `host` (`port`) goes direct: loopback always, else when
/// an entry of `no_proxy` names it (`*`; an IP or CIDR; a domain and its
/// subdomains, `.domain` too; any of them with `:port`).
pub fn bypass(host: &str, port: Option<u16>, no_proxy: &str) -> bool {
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let ip = host.parse::<IpAddr>().ok();
    if host == "localhost" || host.ends_with(".localhost") || ip.is_some_and(|i| i.is_loopback()) {
        return true;
    }
    no_proxy
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .any(|entry| entry_matches(entry, &host, ip, port))
}

fn entry_matches(entry: &str, host: &str, ip: Option<IpAddr>, port: Option<u16>) -> bool {
    if entry == "*" {
        return true;
    }
    let entry = entry.to_ascii_lowercase();
    if let Some((net, bits)) = entry.split_once('/') {
        return match (net.parse::<IpAddr>(), bits.parse::<u8>(), ip) {
            (Ok(net), Ok(bits), Some(ip)) => in_cidr(ip, net, bits),
            _ => false,
        };
    }
    if let Ok(e) = entry
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        return ip == Some(e);
    }
    let (name, want_port) = match entry.rsplit_once(':') {
        Some((name, p)) => match p.parse::<u16>() {
            Ok(p) => (name.trim_start_matches('[').trim_end_matches(']'), Some(p)),
            Err(_) => return false,
        },
        None => (entry.as_str(), None),
    };
    if want_port.is_some() && want_port != port {
        return false;
    }
    if let Ok(e) = name.parse::<IpAddr>() {
        return ip == Some(e);
    }
    let domain = name.trim_start_matches("*.").trim_start_matches('.');
    host == domain || host.ends_with(&format!(".{domain}"))
}

fn in_cidr(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(ip), IpAddr::V4(net)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(ip) & mask == u32::from(net) & mask
        }
        (IpAddr::V6(ip), IpAddr::V6(net)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(ip) & mask == u128::from(net) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_no_proxy_go_direct() {
        let cases = [
            ("127.0.0.1", Some(6443), "", true),
            ("::1", None, "", true),
            ("[::1]", None, "", true),
            ("localhost", None, "", true),
            ("127.3.4.5", None, "", true),
            ("10.0.0.1", Some(443), "", false),
            ("10.0.0.1", Some(443), "*", true),
            ("10.0.0.1", Some(443), "10.0.0.0/8", true),
            ("11.0.0.1", Some(443), "10.0.0.0/8", false),
            ("10.0.0.1", Some(443), "10.0.0.1", true),
            ("10.0.0.1", Some(443), "10.0.0.1:443", true),
            ("10.0.0.1", Some(443), "10.0.0.1:6443", false),
            ("api.corp.example", Some(443), "corp.example", true),
            ("api.corp.example", Some(443), ".corp.example", true),
            ("api.corp.example", Some(443), "*.corp.example", true),
            ("corp.example", Some(443), "corp.example", true),
            ("evilcorp.example", Some(443), "corp.example", false),
            (
                "api.corp.example",
                Some(443),
                "other.example, corp.example:443",
                true,
            ),
            ("api.corp.example", Some(443), "corp.example:8443", false),
            ("API.Corp.Example", Some(443), "corp.example", true),
            ("fd00::1", None, "fd00::/8", true),
            ("fe80::1", None, "fd00::/8", false),
            ("10.0.0.1", Some(443), "10.0.0.0/40", false),
            ("10.0.0.1", Some(443), ",, ,", false),
            ("kubernetes.default.svc", Some(443), ".svc", true),
        ];
        for (host, port, no_proxy, direct) in cases {
            assert_eq!(
                bypass(host, port, no_proxy),
                direct,
                "{host} {port:?} NO_PROXY={no_proxy:?}"
            );
        }
    }
}
