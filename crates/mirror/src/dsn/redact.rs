//! A PostgreSQL URL or keyword/value string with its passwords hidden:
//! what errors and logs show.

use super::{decode, keyword_pairs, url_prefix_len};

/// The shown form of a password.
const HIDDEN: &str = "***";

/// `dsn` with every password replaced by `***`: the user info's password
/// of a URL, a `password=` query parameter, a `password=` of a keyword/value
/// string. When unsure it hides more, never less: a password holding an
/// unescaped `@` is hidden up to the last `@`, and a keyword/value string
/// that does not parse is hidden whole.
pub fn redact(dsn: &str) -> String {
    let Some(prefix) = url_prefix_len(dsn) else {
        return redact_keyword_value(dsn);
    };
    let mut out = dsn[..prefix].to_owned();
    let rest = &dsn[prefix..];
    let after_user = match rest.rfind('@') {
        Some(at) => {
            let user_info = &rest[..at];
            match user_info.find(':') {
                Some(colon) => {
                    out.push_str(&user_info[..=colon]);
                    out.push_str(HIDDEN);
                }
                None => out.push_str(user_info),
            }
            out.push('@');
            &rest[at + 1..]
        }
        None => rest,
    };
    out.push_str(after_user);
    hide_password_params(&out, prefix)
}

/// `url` with the value of every `password=` query parameter hidden,
/// looking wherever one may start (`?` or `&`) from byte `from`.
fn hide_password_params(url: &str, from: usize) -> String {
    let mut shown = String::with_capacity(url.len());
    let mut copied = 0;
    for (i, c) in url.char_indices().skip_while(|(i, _)| *i < from) {
        if i < copied || !(c == '?' || c == '&') {
            continue;
        }
        let param = &url[i + 1..];
        let param = &param[..param.find('&').unwrap_or(param.len())];
        if let Some((key, _)) = param.split_once('=')
            && decode(key) == "password"
        {
            shown.push_str(&url[copied..i + 1 + key.len() + 1]);
            shown.push_str(HIDDEN);
            copied = i + 1 + param.len();
        }
    }
    shown.push_str(&url[copied..]);
    shown
}

fn redact_keyword_value(dsn: &str) -> String {
    let Some(pairs) = keyword_pairs(dsn) else {
        return if dsn.trim().is_empty() {
            dsn.to_owned()
        } else {
            HIDDEN.to_owned()
        };
    };
    let mut out = String::with_capacity(dsn.len());
    let mut from = 0;
    for pair in pairs.iter().filter(|p| &dsn[p.key.clone()] == "password") {
        out.push_str(&dsn[from..pair.value_span.start]);
        out.push_str(HIDDEN);
        from = pair.value_span.end;
    }
    out.push_str(&dsn[from..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_and_nothing_else() {
        let cases = [
            ("postgres://u:secret@h/db", "postgres://u:***@h/db"),
            ("postgres://u@h:5432/db", "postgres://u@h:5432/db"),
            ("postgres://h/db", "postgres://h/db"),
            (
                "postgresql://u:p%40secret@h:5432/db?sslmode=verify-full&sslrootcert=/ca.crt",
                "postgresql://u:***@h:5432/db?sslmode=verify-full&sslrootcert=/ca.crt",
            ),
            // An unescaped `@` in the password: hidden up to the last `@`.
            ("postgres://u:se@cret@h/db", "postgres://u:***@h/db"),
            // `@` later in the URL: more is hidden, never less.
            ("postgres://u:secret@h/db?options=a@b", "postgres://u:***@b"),
            (
                "postgres://h/db?sslmode=require&password=secret&user=u",
                "postgres://h/db?sslmode=require&password=***&user=u",
            ),
            (
                "postgres://h/db?pass%77ord=secret",
                "postgres://h/db?pass%77ord=***",
            ),
            (
                "postgres://h/db?password=secret&x=a@b",
                "postgres://h/db?password=***&x=a@b",
            ),
            (
                "host=h password=secret user=u",
                "host=h password=*** user=u",
            ),
            (
                "host=h password = 'se cret\\'' user=u",
                "host=h password = *** user=u",
            ),
            ("host=h password='secret", "***"),
            ("host=h user=u", "host=h user=u"),
            ("", ""),
        ];
        for (dsn, shown) in cases {
            let redacted = redact(dsn);
            assert_eq!(redacted, shown, "{dsn}");
            assert!(!redacted.contains("secret"), "{redacted}");
        }
    }
}
