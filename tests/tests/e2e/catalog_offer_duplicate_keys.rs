//! A key given twice inside an offer body's `plans`, a plan's `resources`
//! or `labels` is refused (issue 29, a low item), as a duplicate among
//! the body's own fields already was: 400 naming the key and the object it
//! is in, and nothing stored (a new offer is not created, an existing one
//! keeps its content and version).

use e2e::catalog::{provider, Backend, Env};

const BODY: &str = r#"{"name":"x","type":"compute","labels":{"region":"eu"},
    "plans":{"a":{"name":"a","cost":"1","resources":{"cpu":"1","memory":"1Gi"}}}}"#;

#[test]
fn keys_given_twice_inside_an_offer_are_refused() {
    let env = Env::new(Backend::Embedded);
    let c = env.start();
    let token = c.login(&provider(1));
    c.put_offer("kept", &serde_json::from_str(BODY).unwrap(), &token);
    let stored = c.get("/offer/kept").json;

    let cases = [
        (
            r#""cpu":"1""#,
            r#""cpu":"1","cpu":"64""#,
            "plans.a.resources",
            "cpu",
        ),
        (
            r#""region":"eu""#,
            r#""region":"eu","region":"us""#,
            "labels",
            "region",
        ),
        (
            r#""plans":{"#,
            r#""plans":{"a":{"name":"b","cost":"9"},"#,
            "plans",
            "a",
        ),
    ];
    for (from, to, field, key) in cases {
        assert!(BODY.contains(from), "{from}");
        let twice = BODY.replacen(from, to, 1);
        for id in ["fresh", "kept"] {
            let r = c.post_raw(
                &format!("/offer/{id}"),
                twice.clone().into_bytes(),
                Some(&token),
            );
            let message = r.expect_error(400);
            assert!(
                message.starts_with(&format!("{field}: duplicate key `{key}`")),
                "{id}, {twice}: {message}"
            );
        }
        assert_eq!(c.get("/offer/fresh").status, 404, "nothing created");
        assert_eq!(c.get("/offer/kept").json, stored, "nothing changed");
    }
}
