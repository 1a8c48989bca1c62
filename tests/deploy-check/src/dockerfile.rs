//! The Dockerfiles of `deploy/docker/`: parsed (line continuations,
//! comments, stages) and held to what the images promise — built in one
//! stage with `cargo build --release --locked -p <crate> --bin <bin>`, run
//! from a later stage that holds only that binary, as a non-root `USER`,
//! with the binary as the `ENTRYPOINT`.

/// One `FROM` and the instructions under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    pub base: String,
    pub name: Option<String>,
    /// `(INSTRUCTION, arguments)`, the instruction upper-cased.
    pub instructions: Vec<(String, String)>,
}

impl Stage {
    fn all<'a>(&'a self, instruction: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.instructions
            .iter()
            .filter(move |(i, _)| i == instruction)
            .map(|(_, a)| a.as_str())
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DockerfileError {
    #[error("line {line}: {message}")]
    Syntax { line: usize, message: String },
}

/// Split into stages; instructions before the first `FROM` other than
/// `ARG` are refused, as Docker refuses them.
pub fn parse(text: &str) -> Result<Vec<Stage>, DockerfileError> {
    let mut stages: Vec<Stage> = Vec::new();
    let mut pending = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        if pending.is_empty() {
            start = i + 1;
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
        } else if trimmed.starts_with('#') {
            // Comment lines inside a continued instruction are dropped.
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => {
                pending.push_str(head);
                pending.push(' ');
                continue;
            }
            None => pending.push_str(trimmed),
        }
        let line = std::mem::take(&mut pending);
        let (instruction, args) = line.split_once(char::is_whitespace).unwrap_or((&line, ""));
        let instruction = instruction.to_ascii_uppercase();
        let args = args.split_whitespace().collect::<Vec<_>>().join(" ");
        if instruction == "FROM" {
            let words: Vec<&str> = args
                .split(' ')
                .filter(|w| !w.starts_with("--platform"))
                .collect();
            let (base, name) = match words.as_slice() {
                [base] => (base.to_string(), None),
                [base, as_, name] if as_.eq_ignore_ascii_case("as") => {
                    (base.to_string(), Some(name.to_string()))
                }
                _ => {
                    return Err(DockerfileError::Syntax {
                        line: start,
                        message: format!("FROM {args}: expected `FROM image [AS name]`"),
                    })
                }
            };
            stages.push(Stage {
                base,
                name,
                instructions: Vec::new(),
            });
        } else if let Some(stage) = stages.last_mut() {
            stage.instructions.push((instruction, args));
        } else if instruction != "ARG" {
            return Err(DockerfileError::Syntax {
                line: start,
                message: format!("{instruction} before the first FROM"),
            });
        }
    }
    if !pending.is_empty() {
        return Err(DockerfileError::Syntax {
            line: start,
            message: "the file ends inside a continued line".to_string(),
        });
    }
    Ok(stages)
}

/// A user that is root: by name, uid 0, or `root:…`/`0:…`.
fn is_root(user: &str) -> bool {
    let who = user.split(':').next().unwrap_or(user).trim();
    who.is_empty() || who == "root" || who == "0"
}

fn words(args: &str) -> Vec<&str> {
    args.split_whitespace().collect()
}

/// Everything wrong with a Dockerfile meant to ship `bin` of `package`
/// (empty: nothing).
pub fn problems(text: &str, package: &str, bin: &str) -> Vec<String> {
    let stages = match parse(text) {
        Ok(stages) => stages,
        Err(e) => return vec![e.to_string()],
    };
    let mut out = Vec::new();
    let Some((last, builders)) = stages.split_last() else {
        return vec!["no FROM".to_string()];
    };
    if builders.is_empty() {
        out.push("not multi-stage: the toolchain would ship in the image".to_string());
    }
    // The stage that builds: a RUN with cargo build naming the crate and
    // the binary, in release mode, from the lock file.
    let builder = builders.iter().find(|s| {
        s.all("RUN").any(|run| {
            let w = words(run);
            run.contains("cargo build")
                && w.windows(2)
                    .any(|p| p == ["-p", package] || p == ["--package", package])
                && w.windows(2).any(|p| p == ["--bin", bin])
        })
    });
    match builder {
        None => out.push(format!(
            "no builder stage runs `cargo build … -p {package} --bin {bin}`"
        )),
        Some(builder) => {
            let run = builder
                .all("RUN")
                .find(|r| r.contains("cargo build"))
                .unwrap_or_default();
            for flag in ["--release", "--locked"] {
                if !words(run).contains(&flag) {
                    out.push(format!("cargo build without {flag}"));
                }
            }
            let name = builder.name.as_deref().unwrap_or_default();
            let copied = last.all("COPY").any(|c| {
                c.contains(&format!("--from={name} "))
                    && words(c)
                        .iter()
                        .any(|w| w.ends_with(&format!("/release/{bin}")))
            });
            if name.is_empty() || !copied {
                out.push(format!(
                    "the final stage does not COPY --from the builder's release/{bin}"
                ));
            }
        }
    }
    if builders.iter().any(|b| Some(&last.base) == b.name.as_ref()) {
        out.push("the final stage is built on the builder stage".to_string());
    }
    match last.all("USER").last() {
        None => out.push("the final stage sets no USER (it would run as root)".to_string()),
        Some(user) if is_root(user) => out.push(format!("the final stage runs as {user}")),
        Some(_) => {}
    }
    let entrypoint = last
        .all("ENTRYPOINT")
        .last()
        .map(|e| serde_json::from_str::<Vec<String>>(e).map_err(|_| e.to_string()));
    match entrypoint {
        Some(Ok(argv))
            if argv
                .first()
                .is_some_and(|a| a.ends_with(&format!("/{bin}"))) => {}
        Some(Ok(argv)) => out.push(format!("ENTRYPOINT {argv:?} does not run {bin}")),
        Some(Err(e)) => out.push(format!(
            "ENTRYPOINT {e}: use the exec form [\"/path/{bin}\"] (the shell form needs a shell \
             and swallows signals)"
        )),
        None => out.push("the final stage has no ENTRYPOINT".to_string()),
    }
    // Only the binary: nothing else is copied into the final stage.
    let other_copies = last
        .all("COPY")
        .chain(last.all("ADD"))
        .filter(|c| {
            !words(c)
                .iter()
                .any(|w| w.ends_with(&format!("/release/{bin}")))
        })
        .count();
    if other_copies > 0 {
        out.push(format!(
            "the final stage copies {other_copies} thing(s) besides the binary"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
# syntax=docker/dockerfile:1
ARG RUST_VERSION=1.95
FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /src
COPY . .
RUN cargo build --release --locked \\
    # only this binary
    -p catalog --bin catalog

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /src/target/release/catalog /usr/local/bin/catalog
USER nonroot:nonroot
ENTRYPOINT [\"/usr/local/bin/catalog\"]
";

    #[test]
    fn a_multi_stage_non_root_dockerfile_passes() {
        let stages = parse(GOOD).unwrap();
        assert_eq!(stages.len(), 2);
        assert_eq!(stages[0].name.as_deref(), Some("builder"));
        assert_eq!(
            stages[0].all("RUN").next(),
            Some("cargo build --release --locked -p catalog --bin catalog")
        );
        assert_eq!(problems(GOOD, "catalog", "catalog"), Vec::<String>::new());
    }

    #[test]
    fn each_broken_promise_is_named() {
        let cases = [
            (GOOD.replace("USER nonroot:nonroot\n", ""), "sets no USER"),
            (
                GOOD.replace("USER nonroot:nonroot", "USER 0:0"),
                "runs as 0:0",
            ),
            (
                GOOD.replace("-p catalog", "-p aggregator"),
                "no builder stage",
            ),
            (GOOD.replace("--locked ", ""), "without --locked"),
            (
                GOOD.replace("[\"/usr/local/bin/catalog\"]", "/usr/local/bin/catalog"),
                "exec form",
            ),
            (
                GOOD.replace(
                    "USER nonroot",
                    "COPY --from=builder /src/webui /webui\nUSER nonroot",
                ),
                "besides the binary",
            ),
        ];
        for (text, expected) in cases {
            let found = problems(&text, "catalog", "catalog");
            assert!(
                found.iter().any(|p| p.contains(expected)),
                "{expected}: {found:?}"
            );
        }
        let single = "FROM rust:1\nRUN cargo build --release --locked -p catalog --bin catalog\nUSER 1000\nENTRYPOINT [\"/x/catalog\"]\n";
        assert!(problems(single, "catalog", "catalog")
            .iter()
            .any(|p| p.contains("not multi-stage")));
        assert!(parse("RUN true\n").is_err());
        assert!(parse("FROM a \\\n").is_err());
    }
}
