//! The Dockerfiles of `deploy/docker/`: parsed (line continuations,
//! comments, global `ARG`s, stages) and held to what the images promise —
//! one recipe per image, whichever way its binary was built:
//!
//! - the final stage, `FROM scratch`, is the only one that sets `USER`
//!   (not root), `ENTRYPOINT` (the binary, exec form) or `CMD`, and copies
//!   one thing: `/rootfs/` from the stage the global `ARG BINARY` names;
//! - that `ARG` defaults to the release stage, which runs
//!   `cargo build --release --locked -p <crate> --bin <bin>` and then
//!   `deploy/docker/rootfs.sh` on `target/release/<bin>`;
//! - the `prebuilt` stage (`FROM scratch`) takes the same `rootfs/` from
//!   the build context, which `scripts/build-images.sh` assembles with the
//!   same `rootfs.sh` from the test command's binaries.
//!
//! A second stage with its own `ENTRYPOINT` (a `--target` image) would be a
//! second recipe whose user, entrypoint or contents could drift from the
//! shipped one; the tests would then prove an image nobody ships.

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

/// A parsed Dockerfile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dockerfile {
    /// The `ARG`s before the first `FROM` (usable in `FROM` lines), with
    /// their defaults.
    pub args: Vec<(String, Option<String>)>,
    pub stages: Vec<Stage>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DockerfileError {
    #[error("line {line}: {message}")]
    Syntax { line: usize, message: String },
}

/// Split into global `ARG`s and stages; other instructions before the
/// first `FROM` are refused, as Docker refuses them.
pub fn parse(text: &str) -> Result<Dockerfile, DockerfileError> {
    let mut args = Vec::new();
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
        let (instruction, args_text) = line.split_once(char::is_whitespace).unwrap_or((&line, ""));
        let instruction = instruction.to_ascii_uppercase();
        let args_text = args_text.split_whitespace().collect::<Vec<_>>().join(" ");
        if instruction == "FROM" {
            let words: Vec<&str> = args_text
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
                        message: format!("FROM {args_text}: expected `FROM image [AS name]`"),
                    })
                }
            };
            stages.push(Stage {
                base,
                name,
                instructions: Vec::new(),
            });
        } else if let Some(stage) = stages.last_mut() {
            stage.instructions.push((instruction, args_text));
        } else if instruction == "ARG" {
            let (name, default) = match args_text.split_once('=') {
                Some((name, default)) => (name, Some(default.to_string())),
                None => (args_text.as_str(), None),
            };
            args.push((name.to_string(), default));
        } else {
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
    Ok(Dockerfile { args, stages })
}

/// A user that is root: by name, uid 0, or `root:…`/`0:…`.
fn is_root(user: &str) -> bool {
    let who = user.split(':').next().unwrap_or(user).trim();
    who.is_empty() || who == "root" || who == "0"
}

fn words(args: &str) -> Vec<&str> {
    args.split_whitespace().collect()
}

/// The global `ARG` that `base` (`${NAME}` or `$NAME`) expands, if any.
fn arg_of(base: &str) -> Option<&str> {
    let name = base.strip_prefix('$')?;
    Some(
        name.strip_prefix('{')
            .and_then(|n| n.strip_suffix('}'))
            .unwrap_or(name),
    )
}

/// The instructions that configure the image rather than fill it: only the
/// final stage may carry them.
const IMAGE_CONFIG: [&str; 3] = ["ENTRYPOINT", "CMD", "USER"];

/// What is wrong with the release stage of `bin` of `package`.
fn release_problems(release: &Stage, package: &str, bin: &str) -> Vec<String> {
    let mut out = Vec::new();
    let runs: Vec<&str> = release.all("RUN").collect();
    let build = runs.iter().find(|run| {
        let w = words(run);
        run.contains("cargo build")
            && w.windows(2)
                .any(|p| p == ["-p", package] || p == ["--package", package])
            && w.windows(2).any(|p| p == ["--bin", bin])
    });
    match build {
        None => out.push(format!(
            "the release stage does not run `cargo build … -p {package} --bin {bin}`"
        )),
        Some(run) => {
            for flag in ["--release", "--locked"] {
                if !words(run).contains(&flag) {
                    out.push(format!("cargo build without {flag}"));
                }
            }
        }
    }
    let assembled = runs.iter().any(|run| {
        words(run).windows(3).any(|w| {
            w == [
                "deploy/docker/rootfs.sh",
                &format!("target/release/{bin}"),
                "/rootfs",
            ]
        })
    });
    if !assembled {
        out.push(format!(
            "the release stage does not run `deploy/docker/rootfs.sh target/release/{bin} /rootfs` \
             (the one recipe for what ships)"
        ));
    }
    out
}

/// Everything wrong with a Dockerfile meant to ship `bin` of `package`
/// (empty: nothing).
pub fn problems(text: &str, package: &str, bin: &str) -> Vec<String> {
    let Dockerfile { args, stages } = match parse(text) {
        Ok(parsed) => parsed,
        Err(e) => return vec![e.to_string()],
    };
    let mut out = Vec::new();
    let Some((last, earlier)) = stages.split_last() else {
        return vec!["no FROM".to_string()];
    };
    let stage = |name: &str| earlier.iter().find(|s| s.name.as_deref() == Some(name));

    // One recipe: the final stage alone configures the image.
    for s in earlier {
        for instruction in IMAGE_CONFIG {
            if s.all(instruction).next().is_some() {
                out.push(format!(
                    "stage {} sets {instruction}: a second recipe for the image (one final \
                     stage; choose the binary with --build-arg BINARY=…)",
                    s.name.as_deref().unwrap_or(&s.base)
                ));
            }
        }
    }
    if last.base != "scratch" {
        out.push(format!(
            "the final stage is built on {}, not scratch: it would ship more than the binary, \
             its libraries and CA certificates",
            last.base
        ));
    }

    // The final stage's one COPY, from the stage BINARY selects.
    let copies: Vec<&str> = last.all("COPY").chain(last.all("ADD")).collect();
    let from_rootfs = copies.iter().find_map(|c| match words(c).as_slice() {
        [from, "/rootfs/", "/"] => from.strip_prefix("--from="),
        _ => None,
    });
    if copies.len() > 1 {
        out.push(format!(
            "the final stage copies {} thing(s) besides the root file system",
            copies.len() - 1
        ));
    }
    match from_rootfs {
        None => out.push("the final stage does not `COPY --from=<stage> /rootfs/ /`".to_string()),
        Some(selector) => {
            let selected = stage(selector).and_then(|s| {
                let arg = arg_of(&s.base)?;
                s.instructions.is_empty().then_some(arg)
            });
            let default = selected.and_then(|arg| {
                args.iter()
                    .find(|(name, _)| name == arg)
                    .and_then(|(_, default)| default.as_deref())
            });
            match default {
                None => out.push(format!(
                    "the final stage copies from {selector}, which is not `FROM ${{ARG}}` with a \
                     global ARG's default naming the release stage"
                )),
                Some(release_name) => match stage(release_name) {
                    None => out.push(format!("no stage named {release_name} (the ARG's default)")),
                    Some(release) => out.extend(release_problems(release, package, bin)),
                },
            }
        }
    }

    // The prebuilt stage: the context's rootfs/, nothing else.
    match stage("prebuilt") {
        None => out.push(
            "no `prebuilt` stage: scripts/build-images.sh could not build this image".to_string(),
        ),
        Some(prebuilt) => {
            let only_rootfs = prebuilt.instructions.len() == 1
                && prebuilt.all("COPY").next() == Some("rootfs/ /rootfs/");
            if prebuilt.base != "scratch" || !only_rootfs {
                out.push(
                    "the prebuilt stage is not `FROM scratch` with only `COPY rootfs/ /rootfs/`"
                        .to_string(),
                );
            }
        }
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
                .is_some_and(|a| a == &format!("/usr/local/bin/{bin}")) => {}
        Some(Ok(argv)) => out.push(format!(
            "ENTRYPOINT {argv:?} does not run /usr/local/bin/{bin} (where rootfs.sh puts it)"
        )),
        Some(Err(e)) => out.push(format!(
            "ENTRYPOINT {e}: use the exec form [\"/usr/local/bin/{bin}\"] (the shell form needs \
             a shell and swallows signals)"
        )),
        None => out.push("the final stage has no ENTRYPOINT".to_string()),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
# syntax=docker/dockerfile:1
ARG RUST_VERSION=1.95
ARG BINARY=release

FROM rust:${RUST_VERSION}-bookworm AS release
WORKDIR /src
COPY . .
RUN cargo build --release --locked \\
    # only this binary
    -p catalog --bin catalog \\
 && bash deploy/docker/rootfs.sh target/release/catalog /rootfs

FROM scratch AS prebuilt
COPY rootfs/ /rootfs/

FROM ${BINARY} AS binary

FROM scratch
COPY --from=binary /rootfs/ /
USER 65532:65532
ENTRYPOINT [\"/usr/local/bin/catalog\"]
";

    #[test]
    fn one_recipe_with_two_sources_for_the_binary_passes() {
        let parsed = parse(GOOD).unwrap();
        assert_eq!(
            parsed.args,
            [
                ("RUST_VERSION".to_string(), Some("1.95".to_string())),
                ("BINARY".to_string(), Some("release".to_string()))
            ]
        );
        assert_eq!(parsed.stages.len(), 4);
        assert_eq!(parsed.stages[0].name.as_deref(), Some("release"));
        assert_eq!(
            parsed.stages[0].all("RUN").next(),
            Some(
                "cargo build --release --locked -p catalog --bin catalog && bash \
                 deploy/docker/rootfs.sh target/release/catalog /rootfs"
            )
        );
        assert_eq!(parsed.stages[2].base, "${BINARY}");
        assert_eq!(problems(GOOD, "catalog", "catalog"), Vec::<String>::new());
    }

    #[test]
    fn each_broken_promise_is_named() {
        let cases = [
            (GOOD.replace("USER 65532:65532\n", ""), "sets no USER"),
            (GOOD.replace("USER 65532:65532", "USER 0:0"), "runs as 0:0"),
            (
                GOOD.replace("-p catalog", "-p aggregator"),
                "does not run `cargo build",
            ),
            (GOOD.replace("--locked ", ""), "without --locked"),
            (
                GOOD.replace(" \\\n && bash deploy/docker/rootfs.sh target/release/catalog /rootfs", ""),
                "rootfs.sh target/release/catalog",
            ),
            (
                GOOD.replace("[\"/usr/local/bin/catalog\"]", "/usr/local/bin/catalog"),
                "exec form",
            ),
            (
                GOOD.replace("[\"/usr/local/bin/catalog\"]", "[\"/bin/catalog\"]"),
                "does not run /usr/local/bin/catalog",
            ),
            (
                GOOD.replace(
                    "USER 65532",
                    "COPY --from=release /src/webui /webui\nUSER 65532",
                ),
                "besides the root file system",
            ),
            (
                GOOD.replace(
                    "FROM scratch\nCOPY --from",
                    "FROM gcr.io/distroless/cc-debian12:nonroot\nCOPY --from",
                ),
                "not scratch",
            ),
            // A `--target prebuilt` image beside the shipped one.
            (
                GOOD.replace(
                    "COPY rootfs/ /rootfs/\n",
                    "COPY rootfs/ /rootfs/\nUSER 65532\nENTRYPOINT [\"/rootfs/usr/local/bin/catalog\"]\n",
                ),
                "stage prebuilt sets ENTRYPOINT: a second recipe",
            ),
            (
                GOOD.replace("COPY --from=binary", "COPY --from=prebuilt"),
                "copies from prebuilt, which is not `FROM ${ARG}`",
            ),
            (
                GOOD.replace("ARG BINARY=release", "ARG BINARY"),
                "copies from binary",
            ),
            (
                GOOD.replace("ARG BINARY=release", "ARG BINARY=debug"),
                "no stage named debug",
            ),
            (
                GOOD.replace("AS prebuilt", "AS from-context"),
                "no `prebuilt` stage",
            ),
            (
                GOOD.replace("COPY rootfs/ /rootfs/", "COPY . /rootfs/"),
                "only `COPY rootfs/ /rootfs/`",
            ),
        ];
        for (text, expected) in cases {
            assert_ne!(text, GOOD, "{expected}: the case changed nothing");
            let found = problems(&text, "catalog", "catalog");
            assert!(
                found.iter().any(|p| p.contains(expected)),
                "{expected}: {found:?}"
            );
        }
        assert!(parse("RUN true\n").is_err());
        assert!(parse("FROM a \\\n").is_err());
    }
}
