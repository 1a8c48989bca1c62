//! Templates rendered off the async runtime, within their [`Bounds`], each
//! verdict kept.
//!
//! minijinja cannot be interrupted: a template runs on the thread that
//! renders it until it ends, runs out of fuel or writes past its output or
//! deadline. Rendered on the runtime's workers, a hostile loop held them
//! all, so `/healthz` went unanswered and SIGTERM was not acted on
//! (issue 41, C-06/U-07). Here each render runs on a blocking thread,
//! [`RENDERS_AT_ONCE`] at most (a slot is held until the render really
//! ends, so abandoned renders cannot pile up), and is given up at its
//! timeout while fuel ends the thread's work.
//!
//! A refused template is refused once (C-08): the verdict of a
//! ServiceCatalog's validation (valid or not) and every refusal of an
//! instance's render are kept by the SHA-256 of what was rendered (the
//! templates and the variables), so the pass over the contracts and the
//! reconciler's next rounds neither render it again nor report it again;
//! a changed template (or parameter) is rendered afresh. A time verdict is
//! kept too: a template refused for its time on a busy machine is tried
//! again when it changes or the controller restarts.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::model::{Service, ServiceCatalogSpec, ServicePlan};
use crate::template::{self, BindingVars, Bounds, Budget, TemplateError, Vars, Why};

/// Renders running at once (each on a blocking thread).
pub const RENDERS_AT_ONCE: usize = 2;

/// Verdicts kept; all are forgotten when this many are held (each is
/// small: a digest and a message).
const KEPT: usize = 4096;

type Digest = [u8; 32];

/// The renderer every caller shares (cheap to clone).
#[derive(Clone)]
pub struct Renderer {
    inner: Arc<Inner>,
}

struct Inner {
    bounds: Bounds,
    slots: Arc<Semaphore>,
    /// ServiceCatalog validations.
    verdicts: Mutex<HashMap<Digest, Result<(), TemplateError>>>,
    /// Refused instance renders (objects or credentials).
    refusals: Mutex<HashMap<Digest, TemplateError>>,
}

/// [`Vars`], owned, to cross to the rendering thread.
#[derive(Debug, Clone, Serialize)]
struct Owned {
    instance_id: String,
    namespace: String,
    remote_namespace: String,
    service: String,
    plan: String,
    hosting: String,
    parameters: Value,
    secrets: BTreeMap<String, String>,
    binding: Option<(String, Value)>,
}

impl Owned {
    fn of(vars: &Vars<'_>) -> Self {
        Self {
            instance_id: vars.instance_id.to_string(),
            namespace: vars.namespace.to_string(),
            remote_namespace: vars.remote_namespace.to_string(),
            service: vars.service.to_string(),
            plan: vars.plan.to_string(),
            hosting: vars.hosting.to_string(),
            parameters: vars.parameters.clone(),
            secrets: vars.secrets.clone(),
            binding: vars
                .binding
                .as_ref()
                .map(|b| (b.id.to_string(), b.parameters.clone())),
        }
    }

    fn vars(&self) -> Vars<'_> {
        Vars {
            instance_id: &self.instance_id,
            namespace: &self.namespace,
            remote_namespace: &self.remote_namespace,
            service: &self.service,
            plan: &self.plan,
            hosting: &self.hosting,
            parameters: &self.parameters,
            secrets: &self.secrets,
            binding: self
                .binding
                .as_ref()
                .map(|(id, parameters)| BindingVars { id, parameters }),
        }
    }
}

fn digest(what: &impl Serialize) -> Digest {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    // Serialising these plain types cannot fail; an empty text would
    // still key them apart by their tag.
    context.update(&serde_json::to_vec(what).unwrap_or_default());
    let mut out = [0; 32];
    out.copy_from_slice(context.finish().as_ref());
    out
}

fn keep<V>(map: &Mutex<HashMap<Digest, V>>, key: Digest, value: V) {
    if let Ok(mut map) = map.lock() {
        if map.len() >= KEPT {
            map.clear();
        }
        map.insert(key, value);
    }
}

impl Renderer {
    pub fn new(bounds: Bounds) -> Self {
        Self {
            inner: Arc::new(Inner {
                bounds,
                slots: Arc::new(Semaphore::new(RENDERS_AT_ONCE)),
                verdicts: Mutex::default(),
                refusals: Mutex::default(),
            }),
        }
    }

    pub fn bounds(&self) -> Bounds {
        self.inner.bounds
    }

    /// [`template::validate`], off the runtime, its verdict kept.
    pub async fn validate(&self, spec: &ServiceCatalogSpec) -> Result<(), TemplateError> {
        let key = digest(&("validate", spec));
        let kept = self
            .inner
            .verdicts
            .lock()
            .ok()
            .and_then(|v| v.get(&key).cloned());
        if let Some(verdict) = kept {
            return verdict;
        }
        let spec = spec.clone();
        let verdict = self
            .off_runtime(move |budget| template::validate_within(&spec, budget))
            .await;
        keep(&self.inner.verdicts, key, verdict.clone());
        verdict
    }

    /// [`template::render_objects`], off the runtime; a refusal kept.
    pub async fn objects(
        &self,
        service: &Service,
        plan: &ServicePlan,
        vars: &Vars<'_>,
    ) -> Result<Vec<Value>, TemplateError> {
        let (service, plan, vars) = (service.clone(), plan.clone(), Owned::of(vars));
        let key = digest(&("objects", &service, &plan, &vars));
        self.refusable(key, move |budget| {
            template::render_objects(&service, &plan, &vars.vars(), budget)
        })
        .await
    }

    /// [`template::render_binding_objects`], off the runtime; a refusal kept.
    pub async fn binding_objects(
        &self,
        service: &Service,
        plan: &ServicePlan,
        vars: &Vars<'_>,
    ) -> Result<Vec<Value>, TemplateError> {
        let (service, plan, vars) = (service.clone(), plan.clone(), Owned::of(vars));
        let key = digest(&("binding objects", &service, &plan, &vars));
        self.refusable(key, move |budget| {
            template::render_binding_objects(&service, &plan, &vars.vars(), budget)
        })
        .await
    }

    /// [`template::render_credentials`], off the runtime; a refusal kept.
    pub async fn credentials(
        &self,
        service: &Service,
        plan: &ServicePlan,
        vars: &Vars<'_>,
    ) -> Result<BTreeMap<String, String>, TemplateError> {
        let (service, plan, vars) = (service.clone(), plan.clone(), Owned::of(vars));
        let key = digest(&("credentials", &service, &plan, &vars));
        self.refusable(key, move |budget| {
            template::render_credentials(&service, &plan, &vars.vars(), budget)
        })
        .await
    }

    async fn refusable<T: Send + 'static>(
        &self,
        key: Digest,
        render: impl FnOnce(&mut Budget) -> Result<T, TemplateError> + Send + 'static,
    ) -> Result<T, TemplateError> {
        let kept = self
            .inner
            .refusals
            .lock()
            .ok()
            .and_then(|r| r.get(&key).cloned());
        if let Some(refusal) = kept {
            return Err(refusal);
        }
        let result = self.off_runtime(render).await;
        if let Err(refusal) = &result {
            keep(&self.inner.refusals, key, refusal.clone());
        }
        result
    }

    /// `render` on a blocking thread once a slot is free, given up at the
    /// bound's time (named after the template it was rendering then).
    async fn off_runtime<T: Send + 'static>(
        &self,
        render: impl FnOnce(&mut Budget) -> Result<T, TemplateError> + Send + 'static,
    ) -> Result<T, TemplateError> {
        let bounds = self.inner.bounds;
        let failed = |at: template::Place, why| TemplateError {
            service: at.service,
            plan: at.plan,
            template: at.template,
            why: Box::new(why),
        };
        let Ok(slot) = self.inner.slots.clone().acquire_owned().await else {
            // The semaphore is never closed.
            return Err(failed(Default::default(), Why::TooSlow(bounds.timeout)));
        };
        // The time counts from here: waiting for a slot is not the
        // template's doing.
        let mut budget = Budget::new(bounds);
        let watch = budget.clone();
        let job = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            render(&mut budget)
        });
        match tokio::time::timeout(bounds.timeout, job).await {
            Ok(Ok(result)) => result,
            Ok(Err(panicked)) => Err(failed(
                watch.at(),
                Why::Render(format!("the renderer failed: {panicked}")),
            )),
            Err(_) => Err(failed(watch.at(), Why::TooSlow(bounds.timeout))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::model::ObjectTemplate;

    /// A loop that would write for hours; it writes, so the render's own
    /// deadline stops its thread too (a test's runtime waits for it).
    const LOOP: &str = "{% for i in range(100000) %}{% for j in range(100000) %}#{% endfor %}{% endfor %}apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n";

    fn spec(template: &str) -> ServiceCatalogSpec {
        ServiceCatalogSpec {
            services: vec![Service {
                id: "svc".into(),
                plans: vec![ServicePlan {
                    id: "p".into(),
                    ..ServicePlan::default()
                }],
                templates: vec![ObjectTemplate {
                    name: "t".into(),
                    template: template.into(),
                    runs_at: None,
                }],
                ..Service::default()
            }],
        }
    }

    /// U-07, C-06: a template that would loop for hours (no fuel or
    /// output bound here, so only the time ends it) renders off the runtime: on a
    /// single-threaded runtime a timer still fires while it runs, and the
    /// render is given up at its timeout, named.
    #[tokio::test(flavor = "current_thread")]
    async fn a_hostile_template_leaves_the_runtime_free() {
        let timeout = Duration::from_millis(300);
        let renderer = Renderer::new(Bounds {
            fuel: u64::MAX,
            max_output: usize::MAX,
            timeout,
        });
        let hostile = spec(LOOP);
        let render = renderer.validate(&hostile);
        tokio::pin!(render);
        let ticked = tokio::select! {
            _ = &mut render => false,
            _ = tokio::time::sleep(Duration::from_millis(10)) => true,
        };
        assert!(ticked, "the render held the runtime");
        let e = render.await.unwrap_err();
        assert_eq!(*e.why, Why::TooSlow(timeout));
        assert_eq!(
            (e.service.as_str(), e.plan.as_str(), e.template.as_str()),
            ("svc", "p", "t")
        );
    }

    /// C-08: a refused template is rendered once: the same spec again
    /// answers the kept verdict at once (the deadline would otherwise be
    /// waited for again), a changed one is rendered.
    #[tokio::test(flavor = "current_thread")]
    async fn a_refused_template_is_rendered_once() {
        let timeout = Duration::from_millis(200);
        let renderer = Renderer::new(Bounds {
            fuel: u64::MAX,
            max_output: usize::MAX,
            timeout,
        });
        let hostile = spec(LOOP);
        let first = renderer.validate(&hostile).await.unwrap_err();
        let again = tokio::time::timeout(timeout / 4, renderer.validate(&hostile))
            .await
            .expect("a kept verdict is not rendered again");
        assert_eq!(again.unwrap_err(), first);
        let fine = spec("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n");
        renderer.validate(&fine).await.unwrap();
        // An instance's refused render is kept the same way.
        let secrets = BTreeMap::new();
        let parameters = json!({"n": "x?dryRun=All&x="});
        let named = spec("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ parameters.n }}}\n");
        let vars = Vars {
            instance_id: "c",
            namespace: "svc-c",
            remote_namespace: "svc-c",
            service: "svc",
            plan: "p",
            hosting: "Remote",
            parameters: &parameters,
            secrets: &secrets,
            binding: None,
        };
        let service = &named.services[0];
        let e = renderer
            .objects(service, &service.plans[0], &vars)
            .await
            .unwrap_err();
        assert!(matches!(*e.why, Why::BadName { .. }), "{e}");
        assert_eq!(renderer.inner.refusals.lock().unwrap().len(), 1);
        let hostile_service = &hostile.services[0];
        let slow = renderer
            .objects(hostile_service, &hostile_service.plans[0], &vars)
            .await
            .unwrap_err();
        assert_eq!(*slow.why, Why::TooSlow(timeout));
        let kept = tokio::time::timeout(
            timeout / 4,
            renderer.objects(hostile_service, &hostile_service.plans[0], &vars),
        )
        .await
        .expect("a kept refusal is not rendered again");
        assert_eq!(kept.unwrap_err(), slow);
    }
}
