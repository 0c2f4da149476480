//! Store URLs in messages: the password redacted.

/// The URL with any password replaced by `***`, fit for a message or a log.
///
/// ```
/// use loopguard_store_sqlx::redact_url;
/// assert_eq!(redact_url("postgres://app:s3cret@db/loop"), "postgres://app:***@db/loop");
/// assert_eq!(redact_url("sqlite:///var/lib/loopguard.db"), "sqlite:///var/lib/loopguard.db");
/// ```
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    let redacted = match userinfo.split_once(':') {
        Some((user, _password)) => format!("{user}:***"),
        None => userinfo.to_owned(),
    };
    format!("{scheme}://{redacted}@{host}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_a_message() {
        assert_eq!(
            redact_url("postgres://u:p@h:5432/d?x=1"),
            "postgres://u:***@h:5432/d?x=1"
        );
        assert_eq!(redact_url("postgres://u@h/d"), "postgres://u@h/d");
        assert_eq!(redact_url("memory"), "memory");
    }
}
