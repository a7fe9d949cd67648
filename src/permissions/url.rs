//! URLs as WebFetch fetches them and as `WebFetch(domain:…)` rules compare
//! them: one reading of a URL for both, so a rule can never judge a host
//! other than the one fetched.

use std::net::IpAddr;

use reqwest::Url;

/// Why a URL cannot be fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlProblem {
    InvalidUrl { error: String },
    HttpsSwitch,
    Scheme { scheme: String },
    Credentials,
    NoHost,
}

/// The URL as it will be fetched: http(s) only, no credentials, `http`
/// upgraded to `https` unless the host is a loopback address.
pub fn prepare_url(raw: &str) -> Result<Url, UrlProblem> {
    let mut url = Url::parse(raw.trim()).map_err(|e| UrlProblem::InvalidUrl {
        error: e.to_string(),
    })?;
    match url.scheme() {
        "https" => {}
        "http" => {
            if !is_loopback(&url) {
                url.set_scheme("https")
                    .map_err(|()| UrlProblem::HttpsSwitch)?;
            }
        }
        other => {
            return Err(UrlProblem::Scheme {
                scheme: other.to_string(),
            });
        }
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlProblem::Credentials);
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(UrlProblem::NoHost);
    }
    Ok(url)
}

/// The host a permission rule compares: lower case, without a trailing dot
/// or IPv6 brackets. `None` when `raw` is not a fetchable URL.
pub fn url_host(raw: &str) -> Option<String> {
    let url = prepare_url(raw).ok()?;
    Some(normal_host(&url))
}

/// `url`'s host, lower case, without a trailing dot or IPv6 brackets.
pub fn normal_host(url: &Url) -> String {
    url.host_str()
        .unwrap_or("")
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

fn is_loopback(url: &Url) -> bool {
    let host = normal_host(url);
    host == "localhost"
        || host.ends_with(".localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn http_is_upgraded_except_on_loopback() {
        assert_eq!(
            prepare_url("http://example.com/a?b=1").unwrap().as_str(),
            "https://example.com/a?b=1"
        );
        for local in [
            "http://localhost:8080/x",
            "http://127.0.0.1:9/x",
            "http://[::1]:9/x",
            "http://docs.localhost/",
        ] {
            assert_eq!(prepare_url(local).unwrap().scheme(), "http", "{local}");
        }
        assert!(prepare_url("ftp://example.com").is_err());
        assert!(prepare_url("file:///etc/passwd").is_err());
        assert!(prepare_url("https://user:pw@example.com").is_err());
        assert!(prepare_url("not a url").is_err());
    }

    #[test]
    fn hosts_are_compared_normalised() {
        assert_eq!(
            url_host("https://Example.COM./x").as_deref(),
            Some("example.com")
        );
        assert_eq!(url_host("http://[::1]:8/").as_deref(), Some("::1"));
        // The part before `@` is credentials, not the host: refused.
        assert_eq!(url_host("https://good.com@evil.com/"), None);
    }
}
