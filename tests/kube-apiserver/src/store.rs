//! The objects, by group/resource and `namespace/name`, and every write to
//! them as a real API server makes it: one cluster-wide `resourceVersion`
//! counter, a history of changes for watches (forgotten on compaction),
//! server-set metadata (`uid`, `creationTimestamp`, `generation`,
//! `generateName`), optimistic concurrency (409 on a stale
//! `resourceVersion`), the status subresource (`/status` writes change only
//! `.status`, main writes keep the stored `.status`), finalizers
//! (`deletionTimestamp` instead of removal while any remain), and
//! `openAPIV3Schema` pruning, defaulting and validation for custom
//! resources. The HTTP layer and the test helpers both write through here.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::broadcast;

use crate::admission::{self, Attributes};
use crate::audit::{AuditRecord, ResourceAttributes, SeenRequest};
use crate::crd::{GroupResource, Registry, ResourceDef};
use crate::deletion::{self, Propagation};
use crate::faults::Fault;
use crate::field_validation::{self, FieldCheck, Operation};
use crate::namespace_lifecycle as lifecycle;
use crate::patch::{self, PatchType};
use crate::rbac::{self, Policy, UserInfo};
use crate::status::{ApiError, Cause};
use crate::{csr, owner_refs, rbac_storage, schema, validation};

/// One write, as watches replay it.
#[derive(Debug, Clone)]
pub struct Change {
    pub gr: GroupResource,
    pub rv: u64,
    /// The object after the change (for a deletion, its last state).
    pub object: Value,
    /// The object before the change; `None` when it was created.
    pub previous: Option<Value>,
    pub deleted: bool,
}

/// The objects of one resource as they were at `rv`, for the pages after
/// the first of a list.
pub struct Snapshot {
    pub gr: GroupResource,
    pub rv: u64,
    pub objects: BTreeMap<String, Value>,
}

/// Per-resource request counts.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counters {
    pub lists: usize,
    pub pages: usize,
    pub watches: usize,
    pub gone: usize,
    pub waiting: usize,
    /// Periodic BOOKMARKs sent.
    pub bookmarks: usize,
}

pub use crate::target::Target;

/// `fieldManager` and `force` of a PATCH.
#[derive(Debug, Clone, Default)]
pub struct PatchOptions {
    pub field_manager: Option<String>,
    pub force: bool,
}

/// One client write ([`World::write`]).
pub enum Write<'b> {
    /// POST of an object.
    Create(Value),
    /// PUT of object `name` (or its `target` subresource).
    Update {
        name: &'b str,
        body: Value,
        target: Target,
    },
    /// PATCH of object `name` (or its `target` subresource).
    Patch {
        name: &'b str,
        patch_type: PatchType,
        body: &'b [u8],
        target: Target,
        options: &'b PatchOptions,
    },
}

/// Who makes a write, and how its fields are checked.
#[derive(Debug, Clone, Default)]
pub struct Writer<'a> {
    /// A user RBAC holds, whose write passes the escalation and
    /// owner-reference checks; `None`: one it does not hold.
    pub user: Option<&'a UserInfo>,
    /// A client's request over HTTP, its `fieldValidation`; `None`: an
    /// in-process write (the tests', the controllers' and models'), taken
    /// as given, as a typed client sends no unknown field.
    pub fields: Option<FieldCheck>,
    /// Who sent a client's request, whoever they are (a
    /// CertificateSigningRequest's create strategy writes them into its
    /// spec); `None`: an in-process write, stored as given.
    pub requester: Option<&'a UserInfo>,
}

/// Who a write is by, as admission sees it: the user RBAC holds to its
/// bindings (`None`: one it does not — `system:masters`, an in-process
/// write), and whoever sent it over HTTP (`None`: an in-process write).
#[derive(Debug, Clone, Copy, Default)]
struct Who<'a> {
    user: Option<&'a UserInfo>,
    requester: Option<&'a UserInfo>,
}

impl<'a> Who<'a> {
    /// The requester admission webhooks and policies are told of
    /// (`request.userInfo`): whoever sent the request, held by RBAC or not
    /// (`admission.Attributes.GetUserInfo`, the authenticated user of
    /// every request); an in-process write as the RBAC user it names, if
    /// any.
    fn user_info(&self) -> Option<&'a UserInfo> {
        self.requester.or(self.user)
    }
}

/// Who sends a DELETE, and whether as one of a deletecollection.
#[derive(Debug, Clone, Copy, Default)]
pub struct Deleter<'a> {
    /// Whoever sent it over HTTP (`None`: an in-process delete — the
    /// tests', the garbage collector's, the namespace controller's).
    pub requester: Option<&'a UserInfo>,
    /// Part of a deletecollection.
    pub collection: bool,
}

/// What a write made.
#[derive(Debug, Clone)]
pub struct Written {
    pub object: Value,
    /// Whether the object was created (a POST, or an apply patch to a
    /// missing object).
    pub created: bool,
    /// The `Warning`s to answer with ([`crate::field_validation`]).
    pub warnings: Vec<String>,
}

/// Everything the server holds.
pub struct World {
    pub registry: Registry,
    pub rv: u64,
    /// History at or below this resourceVersion is forgotten.
    pub compacted: u64,
    pub objects: HashMap<GroupResource, BTreeMap<String, Value>>,
    /// Shared with the broadcast: a write's change is made once, and
    /// every watch that receives it clones a pointer, not the objects.
    pub history: Vec<Arc<Change>>,
    pub snapshots: HashMap<u64, Snapshot>,
    pub next_snapshot: u64,
    pub max_page: Option<usize>,
    /// How often an open watch that asked for them gets a BOOKMARK.
    pub bookmark_interval: std::time::Duration,
    /// How long a read at a resourceVersion not reached yet waits for it
    /// before the "Too large resource version" answer (3 s in the real
    /// watch cache).
    pub fresh_wait: std::time::Duration,
    pub counters: HashMap<GroupResource, Counters>,
    pub requests: Vec<SeenRequest>,
    pub audit: Vec<AuditRecord>,
    /// The authorization checks admission and the RBAC storage made for
    /// a request beyond its own and allowed (`approve` on a signer, `bind`
    /// on a role, `update` on an owner's finalizers), one record each with
    /// the request's user: kept apart from [`World::audit`] (the requests
    /// answered) and written beside it into the audit file, so that
    /// `deploy-check` sees those permissions used.
    pub authorization_checks: Vec<AuditRecord>,
    pub faults: Vec<Fault>,
    /// When each request an injected fault answered was answered (tests
    /// bound retry delays by these, not by their own polling).
    pub faults_fired_at: Vec<std::time::Instant>,
    /// Server-side apply: each manager's last applied configuration, per
    /// object and part (main or status).
    pub applied: HashMap<(GroupResource, String, bool), BTreeMap<String, Value>>,
    pub changes: broadcast::Sender<Arc<Change>>,
    /// In-process admission hooks ([`admission`]).
    pub hooks: admission::Hooks,
    /// PodSecurity's defaults for namespaces without its labels
    /// ([`crate::pod_security`]).
    pub pod_security: crate::pod_security::Policy,
    /// PodSecurity's warnings for the write under way, answered with it.
    admission_warnings: std::sync::Mutex<Vec<String>>,
    serial: u64,
    seed: u64,
}

/// `namespace/name`, or `name` for cluster-scoped objects.
pub fn key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

pub fn key_of(object: &Value) -> String {
    key(
        object["metadata"]["namespace"].as_str(),
        object["metadata"]["name"].as_str().unwrap_or_default(),
    )
}

pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn rv_of(object: &Value) -> Option<&str> {
    object["metadata"]["resourceVersion"]
        .as_str()
        .filter(|s| !s.is_empty())
}

fn finalizers(object: &Value) -> Vec<Value> {
    object["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The content `generation` follows: everything but metadata (and status
/// when it is a subresource).
fn spec_part(def: &ResourceDef, object: &Value) -> Value {
    let mut part = object.clone();
    if let Value::Object(map) = &mut part {
        map.remove("metadata");
        if def.status_subresource {
            map.remove("status");
        }
    }
    part
}

/// Fields of metadata only the server sets.
const SYSTEM_META: &[&str] = &[
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "resourceVersion",
    "name",
    "namespace",
];

impl World {
    pub fn new(registry: Registry, changes: broadcast::Sender<Arc<Change>>) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(7);
        Self {
            registry,
            rv: 0,
            compacted: 0,
            objects: HashMap::new(),
            history: Vec::new(),
            snapshots: HashMap::new(),
            next_snapshot: 0,
            max_page: None,
            // A real server's watch cache sends one about once a minute.
            bookmark_interval: std::time::Duration::from_secs(60),
            fresh_wait: std::time::Duration::from_secs(3),
            counters: HashMap::new(),
            requests: Vec::new(),
            audit: Vec::new(),
            authorization_checks: Vec::new(),
            faults: Vec::new(),
            faults_fired_at: Vec::new(),
            applied: HashMap::new(),
            changes,
            hooks: admission::Hooks::default(),
            // The issue's choice for tests; a real cluster's is privileged.
            pod_security: crate::pod_security::Policy::all(crate::pod_security::Level::Baseline),
            admission_warnings: std::sync::Mutex::new(Vec::new()),
            serial: 0,
            seed: seed | 1,
        }
    }

    pub fn counters(&mut self, gr: &GroupResource) -> &mut Counters {
        self.counters.entry(gr.clone()).or_default()
    }

    fn random(&mut self) -> u64 {
        // xorshift64*: random enough for names and uids in tests.
        let mut x = self.seed;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.seed = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn uid(&mut self) -> String {
        self.serial += 1;
        let r = self.random();
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            (r >> 32) as u32,
            (r >> 16) as u16,
            (r >> 4) & 0xfff,
            r & 0xfff,
            self.serial
        )
    }

    fn generated_name(&mut self, prefix: &str) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut name = prefix.to_string();
        for _ in 0..5 {
            let i = (self.random() % ALPHABET.len() as u64) as usize;
            name.push(ALPHABET[i] as char);
        }
        name
    }

    /// Record a change: bump the resourceVersion, stamp it on the object,
    /// keep it for watches and tell the open ones.
    fn commit(
        &mut self,
        gr: &GroupResource,
        mut object: Value,
        previous: Option<Value>,
        deleted: bool,
    ) -> Value {
        self.rv += 1;
        let rv = self.rv;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let key = key_of(&object);
        let objects = self.objects.entry(gr.clone()).or_default();
        if deleted {
            objects.remove(&key);
            // Its managers' applied configurations, main and status: by
            // key, not a walk over every object's.
            for status in [false, true] {
                self.applied.remove(&(gr.clone(), key.clone(), status));
            }
        } else {
            objects.insert(key, object.clone());
        }
        let change = Arc::new(Change {
            gr: gr.clone(),
            rv,
            object: object.clone(),
            previous,
            deleted,
        });
        self.history.push(Arc::clone(&change));
        let _ = self.changes.send(change);
        object
    }

    /// The objects of a resource as they were at `rv`, rolled back from the
    /// present through the history; `None` if that history was compacted
    /// (or `rv` is still to come).
    pub fn objects_at(&self, gr: &GroupResource, rv: u64) -> Option<BTreeMap<String, Value>> {
        if rv < self.compacted || rv > self.rv {
            return None;
        }
        let mut objects = self.objects.get(gr).cloned().unwrap_or_default();
        for change in self.history.iter().rev() {
            if change.rv <= rv {
                break;
            }
            if change.gr != *gr {
                continue;
            }
            let key = key_of(&change.object);
            match &change.previous {
                Some(previous) => {
                    objects.insert(key, previous.clone());
                }
                None => {
                    objects.remove(&key);
                }
            }
        }
        Some(objects)
    }

    pub fn stored(&self, gr: &GroupResource, key: &str) -> Option<&Value> {
        self.objects.get(gr).and_then(|o| o.get(key))
    }

    /// A test's write: create or replace as given (no concurrency check),
    /// keeping the stored uid and creation time. It is validated as a
    /// client's write is ([`World::admit`]), so a fixture a real server
    /// would refuse is refused here too.
    pub fn upsert(&mut self, def: &ResourceDef, mut object: Value) -> Result<Value, ApiError> {
        object["apiVersion"] = json!(def.api_version(def.storage_version()));
        object["kind"] = json!(def.kind);
        if !def.namespaced {
            if let Some(meta) = object["metadata"].as_object_mut() {
                meta.remove("namespace");
            }
        }
        let key = key_of(&object);
        let gr = def.group_resource();
        let previous = self.stored(&gr, &key).cloned();
        self.admit(
            def,
            &mut object,
            previous.as_ref(),
            Target::Main,
            Who::default(),
            None,
        )?;
        match &previous {
            Some(old) => {
                for field in ["uid", "creationTimestamp"] {
                    object["metadata"][field] = old["metadata"][field].clone();
                }
            }
            None => {
                object["metadata"]["uid"] = json!(self.uid());
                object["metadata"]["creationTimestamp"] = json!(now());
                if def.custom || crate::builtin::strategy_keeps_generation(def) {
                    object["metadata"]["generation"] = json!(1);
                }
            }
        }
        Ok(self.commit(&gr, object, previous, false))
    }

    /// Replace stored object `key` with `new` straight in storage, as a
    /// registry's own `GuaranteedUpdate` writes (no admission, no
    /// validation: the `binding` module); `None` if there is no such object.
    pub fn store_as_is(&mut self, def: &ResourceDef, key: &str, new: Value) -> Option<Value> {
        let gr = def.group_resource();
        let previous = self.stored(&gr, key)?.clone();
        Some(self.commit(&gr, new, Some(previous), false))
    }

    /// A test's removal: gone at once, finalizers or not.
    pub fn remove(&mut self, def: &ResourceDef, key: &str) -> Option<Value> {
        let gr = def.group_resource();
        let previous = self.stored(&gr, key)?.clone();
        Some(self.commit(&gr, previous.clone(), Some(previous), true))
    }

    pub fn get(
        &self,
        def: &ResourceDef,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.stored(&def.group_resource(), &key(namespace, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(def, name))
    }

    fn check_type(def: &ResourceDef, body: &Value) -> Result<(), ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request is not a JSON object",
            ));
        }
        if let Some(av) = body["apiVersion"].as_str() {
            if !def.versions.iter().any(|v| def.api_version(v) == av) {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({av}) does not match the expected API version ({})",
                    def.api_version(def.storage_version())
                )));
            }
        }
        if let Some(kind) = body["kind"].as_str() {
            if kind != def.kind {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({kind}) does not match the expected kind ({})",
                    def.kind
                )));
            }
        }
        Ok(())
    }

    /// The roles and bindings stored now, as the RBAC authorizer sees them.
    pub fn rbac_policy(&self) -> Policy {
        let objects =
            |resource: &str| self.list_objects(&GroupResource::new(rbac::RBAC_GROUP, resource));
        Policy::new(&rbac::Stored {
            roles: objects("roles"),
            cluster_roles: objects("clusterroles"),
            role_bindings: objects("rolebindings"),
            cluster_role_bindings: objects("clusterrolebindings"),
        })
    }

    /// The plural resource serving `kind` in `group`/`version` (the REST
    /// mapper's answer), if any.
    pub fn resource_for(&self, group: &str, version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        self.registry
            .all()
            .find(|d| d.group == group && d.kind == kind && d.versions.iter().any(|v| v == version))
            .cloned()
    }

    /// Admit a write as the real server does, in its order (after
    /// NamespaceLifecycle, which [`World::create_as`] runs first): mutating
    /// hooks; for a user RBAC holds, the RBAC storage's escalation check on
    /// Roles and bindings ([`rbac_storage`]: `pkg/registry/rbac/*/policybased/storage.go`
    /// runs it on the object mutating admission made, before the generic
    /// store validates it); then validation as the resource's strategy runs
    /// it — metadata ([`validation::object_meta`]), a custom object pruned,
    /// defaulted and checked against its schema and CEL rules ([`schema`]),
    /// a built-in one against its kind's rules ([`validation::kind_causes`]);
    /// then the validating admission plugins in `AllOrderedPlugins` order:
    /// OwnerReferencesPermissionEnforcement ([`owner_refs`]) and, on a
    /// CSR update, CertificateApproval and CertificateSigning ([`csr`]) —
    /// these for a user RBAC holds —, on a CSR create
    /// CertificateSubjectRestriction (for everyone), ValidatingAdmissionPolicies,
    /// validating hooks ([`admission`]).
    fn admit(
        &self,
        def: &ResourceDef,
        object: &mut Value,
        old: Option<&Value>,
        target: Target,
        who: Who<'_>,
        created: Option<&str>,
    ) -> Result<Vec<ResourceAttributes>, ApiError> {
        let user = who.user;
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Some(message) = validation::decode_error(def, object) {
            return Err(ApiError::bad_request(message));
        }
        let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
        let subresource = target.subresource();
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        // The hooks see the object as sent while they change it.
        let sent = object.clone();
        let request = Attributes {
            operation,
            def,
            subresource,
            namespace: &namespace,
            name: &name,
            object: &sent,
            old_object: old,
        };
        // DefaultTolerationSeconds, a built-in mutating plugin: before the
        // webhooks (`AllOrderedPlugins`), on pods themselves.
        if operation == "CREATE"
            && subresource.is_empty()
            && !def.custom
            && def.group.is_empty()
            && def.plural == "pods"
        {
            crate::taints::default_tolerations(object);
        }
        self.hooks.mutate(&request, object)?;
        if let Some(uid) = created {
            // `rest.BeforeCreate` (staging/src/k8s.io/apiserver/pkg/registry/rest/create.go)
            // fills uid and creationTimestamp after mutating admission and
            // before validation and the validating plugins, which see them.
            object["metadata"]["uid"] = json!(uid);
            object["metadata"]["creationTimestamp"] = json!(now());
        }
        let policy = user.map(|_| self.rbac_policy());
        if let (Some(user), Some(policy)) = (user, &policy) {
            rbac_storage::check(policy, user, def, object, old)?;
        }
        let mut causes = validation::object_meta(def, object);
        if def.custom {
            if let Some(schema) = def.schemas.get(def.storage_version()) {
                schema::prune_and_default(schema, object);
                causes.extend(schema::validate(schema, object, old));
            }
        } else {
            validation::default_kind(def, object);
            causes.extend(validation::kind_causes(def, object, old, target));
            // `pkg/apis/networking/v1/defaults.go` and
            // `pkg/apis/networking/validation/validation.go`.
            if crate::network_policy::is_network_policy(def) {
                crate::network_policy::default(object);
                crate::network_policy::causes(object, old, &mut causes);
            }
            // `pkg/apis/discovery/v1/defaults.go` and
            // `pkg/apis/discovery/validation/validation.go`.
            if crate::endpoint_slice::is_endpoint_slice(def) {
                crate::endpoint_slice::default(object);
                crate::endpoint_slice::causes(object, old, &mut causes);
            }
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid(def, &name, causes));
        }
        // PodSecurity, the first validating plugin of these in
        // `AllOrderedPlugins` (pkg/kubeapiserver/options/plugins.go).
        let ns_object = self
            .stored(&GroupResource::new("", "namespaces"), &namespace)
            .cloned()
            .unwrap_or(Value::Null);
        let warned = crate::pod_security::validate(
            &Attributes {
                object: &*object,
                ..request
            },
            &ns_object,
            self.pod_security,
        )?;
        if let Ok(mut pending) = self.admission_warnings.lock() {
            pending.extend(warned);
        }
        if let (Some(user), Some(policy)) = (user, &policy) {
            let resolve = |group: &str, version: &str, kind: &str| {
                self.resource_for(group, version, kind)
                    .map(|d| d.plural.clone())
            };
            owner_refs::admit(
                policy,
                user,
                &owner_refs::Write {
                    api_group: &def.group,
                    resource: &def.plural,
                    subresource: (!subresource.is_empty()).then_some(subresource),
                    namespace: def.namespaced.then_some(namespace.as_str()),
                    name: &name,
                    object,
                    old,
                },
                &resolve,
            )?;
            // CertificateApproval and CertificateSigning, next in
            // `AllOrderedPlugins`.
            if let (true, Some(old)) = (csr::is_csr(def), old) {
                csr::admit(policy, user, target, &name, object, old)?;
            }
        }
        // CertificateSubjectRestriction, two after them (ClusterTrustBundleAttest
        // between has nothing to admit here): for everyone, `system:masters`
        // included — it checks the request, not the requester.
        if csr::is_csr(def) {
            csr::restrict_subject(target, old.is_none(), &name, object)?;
        }
        let attributes = Attributes { object, ..request };
        self.validate_last(&attributes, who)?;
        Ok(policy.map(|p| p.take_allowed()).unwrap_or_default())
    }

    /// The last validating admission of every write and delete, as
    /// `AllOrderedPlugins` ends: ValidatingAdmissionPolicies with their
    /// bindings, then validating hooks ([`admission`]), told who sent the
    /// request.
    fn validate_last(&self, attributes: &Attributes<'_>, who: Who<'_>) -> Result<(), ApiError> {
        let listed = |plural: &str| -> Vec<Value> {
            self.objects
                .get(&GroupResource::new(admission::GROUP, plural))
                .map(|o| o.values().cloned().collect())
                .unwrap_or_default()
        };
        let bindings = listed("validatingadmissionpolicybindings");
        if !bindings.is_empty() {
            let ns_object = self
                .stored(&GroupResource::new("", "namespaces"), attributes.namespace)
                .cloned()
                .unwrap_or(Value::Null);
            admission::check_policies(
                &listed("validatingadmissionpolicies"),
                &bindings,
                attributes,
                &ns_object,
                who.user_info(),
            )?;
        }
        self.hooks.validate(attributes, who.user_info())
    }

    /// Admission of a DELETE, as `rest.AdmissionToValidateObjectDeleteFunc`
    /// (`staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go`) runs
    /// it inside the registry's delete, once the object is read and the
    /// preconditions hold: operation `DELETE`, no object, the stored object
    /// as the old one, the request's name (`""` for a deletecollection,
    /// whose static attributes name none), its requester; the mutating
    /// hooks registered for DELETE (there is nothing for them to change),
    /// then the validating plugins ([`World::validate_last`]).
    fn admit_delete(
        &self,
        def: &ResourceDef,
        existing: &Value,
        deleter: Deleter<'_>,
    ) -> Result<(), ApiError> {
        let namespace = existing["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default();
        let name = if deleter.collection {
            ""
        } else {
            existing["metadata"]["name"].as_str().unwrap_or_default()
        };
        let attributes = Attributes {
            operation: "DELETE",
            def,
            subresource: "",
            namespace,
            name,
            object: &Value::Null,
            old_object: Some(existing),
        };
        let mut nothing = Value::Null;
        self.hooks.mutate(&attributes, &mut nothing)?;
        let who = Who {
            user: None,
            requester: deleter.requester,
        };
        self.validate_last(&attributes, who)
    }

    /// Keep the authorization checks `admit` made for `user`'s request.
    fn record_checks(&mut self, user: Option<&UserInfo>, checks: Vec<ResourceAttributes>) {
        let Some(user) = user else { return };
        self.authorization_checks
            .extend(checks.into_iter().map(|attributes| AuditRecord {
                user: Some(user.name.clone()),
                method: "AUTHORIZE".into(),
                path: String::new(),
                verb: attributes.verb.clone(),
                resource: Some(attributes),
                code: 200,
                field_manager: None,
            }));
    }

    /// Every client write, one path: a create, update or patch of `def`
    /// by `writer`, its fields checked first when it came over HTTP
    /// ([`crate::field_validation`]: the decoded body of a create or update, the
    /// patched object of a merge, JSON or strategic patch — as the real
    /// handlers decode them before admission).
    pub fn write(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        write: Write<'_>,
        writer: Writer<'_>,
    ) -> Result<Written, ApiError> {
        let who = Who {
            user: writer.user,
            requester: writer.requester,
        };
        let mut fields = writer.fields;
        let version = |body: &Value| {
            body["apiVersion"]
                .as_str()
                .and_then(|av| av.rsplit('/').next())
                .unwrap_or(def.storage_version())
                .to_string()
        };
        // Decode a create's or update's body as the handler does.
        let mut decoded = |body: &mut Value| -> Result<Vec<String>, ApiError> {
            Self::check_type(def, body)?;
            match fields.as_mut() {
                None => Ok(Vec::new()),
                Some(check) => {
                    check.object(def, body);
                    check.finish(def, &version(body), Operation::Decode, body)
                }
            }
        };
        self.take_admission_warnings();
        let (object, created, mut warnings) = match write {
            Write::Create(mut body) => {
                let warnings = decoded(&mut body)?;
                if let (true, Some(requester)) = (csr::is_csr(def), who.requester) {
                    csr::prepare_create(&mut body, requester);
                }
                let object = self.create_object(def, namespace, body, who)?;
                (object, true, warnings)
            }
            Write::Update {
                name,
                mut body,
                target,
            } => {
                let warnings = decoded(&mut body)?;
                let object = self.update_object(def, namespace, name, body, target, who)?;
                (object, false, warnings)
            }
            Write::Patch {
                name,
                patch_type,
                body,
                target,
                options,
            } => {
                let ns = namespace.filter(|_| def.namespaced);
                if patch_type == PatchType::Strategic && def.custom {
                    return Err(ApiError::unsupported_patch(
                        "application/strategic-merge-patch+json",
                        true,
                    ));
                }
                if patch_type == PatchType::Apply && fields.is_some() {
                    let config = serde_yaml_ng::from_slice::<Value>(body).unwrap_or(Value::Null);
                    if let Some(refusal) =
                        field_validation::apply_refusal(def, &version(&config), &config)
                    {
                        return Err(refusal);
                    }
                }
                if patch_type == PatchType::Apply {
                    let (object, created) =
                        self.apply(def, ns, name, body, target, options, who)?;
                    return Ok(Written {
                        object,
                        created,
                        warnings: self.take_admission_warnings(),
                    });
                }
                let mut object = self.get(def, ns, name)?;
                if let Some(check) = fields.as_mut() {
                    match patch_type {
                        PatchType::Json => check.json_patch_ops(body),
                        _ => check.body(body, ""),
                    }
                }
                patch::apply_patch(&mut object, patch_type, body)?;
                let warnings = match fields.as_mut() {
                    None => Vec::new(),
                    Some(check) => {
                        check.object(def, &mut object);
                        check.finish(def, &version(&object), Operation::Patch, &object)?
                    }
                };
                let object = self.update_object(def, ns, name, object, target, who)?;
                (object, false, warnings)
            }
        };
        warnings.extend(self.take_admission_warnings());
        Ok(Written {
            object,
            created,
            warnings,
        })
    }

    /// The admission plugins' warnings since last taken.
    fn take_admission_warnings(&self) -> Vec<String> {
        self.admission_warnings
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default()
    }

    /// POST: create, as the real server does (by a user RBAC does not
    /// hold: the tests' own writes and the in-process controllers').
    pub fn create(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        body: Value,
    ) -> Result<Value, ApiError> {
        self.create_as(def, namespace, body, None)
    }

    /// POST by `user` (`Some`: a user RBAC holds, whose write passes the
    /// escalation and owner-reference checks).
    pub fn create_as(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        body: Value,
        user: Option<&UserInfo>,
    ) -> Result<Value, ApiError> {
        let writer = Writer {
            user,
            ..Writer::default()
        };
        self.write(def, namespace, Write::Create(body), writer)
            .map(|w| w.object)
    }

    fn create_object(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        mut body: Value,
        who: Who<'_>,
    ) -> Result<Value, ApiError> {
        Self::check_type(def, &body)?;
        body["apiVersion"] = json!(def.api_version(def.storage_version()));
        body["kind"] = json!(def.kind);
        if !body["metadata"].is_object() {
            body["metadata"] = json!({});
        }
        let meta = body["metadata"].clone();
        if let Some(ns) = namespace.filter(|_| def.namespaced) {
            let sent = meta["name"]
                .as_str()
                .filter(|n| !n.is_empty())
                .or(meta["generateName"].as_str())
                .unwrap_or_default();
            let stored = self.stored(&GroupResource::new("", "namespaces"), ns);
            lifecycle::admit_write(def, ns, sent, true, stored)?;
        }
        let mut name = meta["name"].as_str().unwrap_or_default().to_string();
        if name.is_empty() {
            match meta["generateName"].as_str().filter(|g| !g.is_empty()) {
                Some(prefix) => name = self.generated_name(prefix),
                None => {
                    return Err(ApiError::invalid(
                        def,
                        "",
                        vec![Cause::new(
                            "FieldValueRequired",
                            "metadata.name",
                            "Required value: name or generateName is required",
                        )],
                    ))
                }
            }
        }
        if rv_of(&body).is_some() {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let m = body["metadata"]
            .as_object_mut()
            .expect("metadata is an object");
        m.insert("name".into(), json!(name));
        if def.namespaced {
            let ns = namespace.unwrap_or_default();
            if let Some(given) = meta["namespace"].as_str().filter(|n| !n.is_empty()) {
                if given != ns {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
            }
            m.insert("namespace".into(), json!(ns));
        } else {
            m.remove("namespace");
        }
        for field in [
            "uid",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "managedFields",
        ] {
            m.remove(field);
        }
        if (def.custom && def.status_subresource) || crate::builtin::strategy_keeps_generation(def)
        {
            if let Some(map) = body.as_object_mut() {
                map.remove("status");
            }
        }
        let uid = self.uid();
        let checks = self.admit(def, &mut body, None, Target::Main, who, Some(&uid))?;
        self.record_checks(who.user, checks);
        let gr = def.group_resource();
        if self
            .stored(&gr, &key(namespace.filter(|_| def.namespaced), &name))
            .is_some()
        {
            return Err(ApiError::already_exists(def, &name));
        }
        if def.custom || crate::builtin::strategy_keeps_generation(def) {
            body["metadata"]["generation"] = json!(1);
        }
        if !def.custom && def.plural == "namespaces" {
            lifecycle::prepare_for_create(&mut body);
        }
        Ok(self.commit(&gr, body, None, false))
    }

    /// PUT: replace the object (or, for [`Target::Status`], its status).
    pub fn update(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        name: &str,
        body: Value,
        target: Target,
    ) -> Result<Value, ApiError> {
        self.update_as(def, namespace, name, body, target, None)
    }

    /// PUT by `user` (as [`World::create_as`]).
    pub fn update_as(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        name: &str,
        body: Value,
        target: Target,
        user: Option<&UserInfo>,
    ) -> Result<Value, ApiError> {
        let write = Write::Update { name, body, target };
        let writer = Writer {
            user,
            ..Writer::default()
        };
        self.write(def, namespace, write, writer).map(|w| w.object)
    }

    fn update_object(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        name: &str,
        body: Value,
        target: Target,
        who: Who<'_>,
    ) -> Result<Value, ApiError> {
        Self::check_type(def, &body)?;
        let given = body["metadata"]["name"].as_str().unwrap_or_default();
        if given != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
        if def.namespaced {
            if let Some(ns) = body["metadata"]["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
            {
                if Some(ns) != namespace {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
            }
        }
        let ns = namespace.filter(|_| def.namespaced);
        let existing = self.get(def, ns, name)?;
        match rv_of(&body) {
            Some(rv) if Some(rv) != rv_of(&existing) => return Err(ApiError::modified(def, name)),
            Some(_) => {}
            None if def.custom => {
                return Err(ApiError::invalid(
                    def,
                    name,
                    vec![Cause::new(
                        "FieldValueInvalid",
                        "metadata.resourceVersion",
                        "Invalid value: 0x0: must be specified for an update",
                    )],
                ))
            }
            None => {}
        }
        let is_namespace = !def.custom && def.group.is_empty() && def.plural == "namespaces";
        let mut new = match target {
            Target::Finalize if is_namespace => lifecycle::finalize(&existing, &body),
            Target::Finalize => return Err(ApiError::method_not_allowed("PUT", "finalize")),
            Target::Approval if !csr::is_csr(def) => {
                return Err(ApiError::method_not_allowed("PUT", "approval"))
            }
            Target::Status | Target::Approval => {
                let mut new = existing.clone();
                match body.get("status") {
                    Some(status) => new["status"] = status.clone(),
                    None => {
                        if let Some(map) = new.as_object_mut() {
                            map.remove("status");
                        }
                    }
                }
                new
            }
            Target::Main => {
                let mut new = body;
                if !new["metadata"].is_object() {
                    new["metadata"] = json!({});
                }
                let meta = new["metadata"]
                    .as_object_mut()
                    .expect("metadata is an object");
                for field in SYSTEM_META {
                    match existing["metadata"].get(*field) {
                        Some(v) => meta.insert(field.to_string(), v.clone()),
                        None => meta.remove(*field),
                    };
                }
                new["apiVersion"] = existing["apiVersion"].clone();
                new["kind"] = existing["kind"].clone();
                if def.status_subresource {
                    let map = new.as_object_mut().expect("an object");
                    match existing.get("status") {
                        Some(status) => map.insert("status".into(), status.clone()),
                        None => map.remove("status"),
                    };
                }
                if is_namespace {
                    lifecycle::prepare_for_update(&mut new, &existing);
                }
                new
            }
        };
        if csr::is_csr(def) {
            // The strategy of the subresource written: `spec` never
            // changes, each subresource only its part of the status.
            new = csr::prepare_update(new, &existing, target, &now());
        }
        let deleting = existing["metadata"]["deletionTimestamp"].is_string();
        if deleting {
            let old = finalizers(&existing);
            let added: Vec<String> = finalizers(&new)
                .iter()
                .filter(|f| !old.contains(f))
                .map(|f| f.to_string())
                .collect();
            if !added.is_empty() {
                return Err(ApiError::invalid(
                    def,
                    name,
                    vec![Cause::new(
                        "FieldValueForbidden",
                        "metadata.finalizers",
                        format!("Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [{}]", added.join(" ")),
                    )],
                ));
            }
        }
        let checks = self.admit(def, &mut new, Some(&existing), target, who, None)?;
        self.record_checks(who.user, checks);
        if (def.custom || crate::builtin::strategy_keeps_generation(def))
            && spec_part(def, &new) != spec_part(def, &existing)
        {
            let generation = existing["metadata"]["generation"].as_i64().unwrap_or(0);
            new["metadata"]["generation"] = json!(generation + 1);
        }
        if new == existing {
            // A no-op write: no new resourceVersion, no event.
            return Ok(existing);
        }
        let gr = def.group_resource();
        // `ShouldDeleteDuringUpdate`, and for a namespace
        // `ShouldDeleteNamespaceDuringUpdate`: its `spec.finalizers` too.
        let gone = deleting
            && finalizers(&new).is_empty()
            && (!is_namespace || lifecycle::spec_finalized(&new));
        Ok(self.commit(&gr, new, Some(existing), gone))
    }

    /// PATCH: the patched object goes through [`World::update`] (a
    /// `metadata.resourceVersion` in the patch is a precondition). Apply
    /// creates a missing object. Returns the object and whether it was
    /// created.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        body: &[u8],
        target: Target,
        options: &PatchOptions,
    ) -> Result<(Value, bool), ApiError> {
        self.patch_as(
            def, namespace, name, patch_type, body, target, options, None,
        )
    }

    /// PATCH by `user` (as [`World::create_as`]).
    #[allow(clippy::too_many_arguments)]
    pub fn patch_as(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        body: &[u8],
        target: Target,
        options: &PatchOptions,
        user: Option<&UserInfo>,
    ) -> Result<(Value, bool), ApiError> {
        let write = Write::Patch {
            name,
            patch_type,
            body,
            target,
            options,
        };
        let writer = Writer {
            user,
            ..Writer::default()
        };
        self.write(def, namespace, write, writer)
            .map(|w| (w.object, w.created))
    }

    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        body: &[u8],
        target: Target,
        options: &PatchOptions,
        who: Who<'_>,
    ) -> Result<(Value, bool), ApiError> {
        let Some(manager) = options.field_manager.as_deref().filter(|m| !m.is_empty()) else {
            return Err(ApiError::new(
                422,
                "Invalid",
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        };
        let config: Value = serde_yaml_ng::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
        Self::check_type(def, &config)?;
        if config["apiVersion"].is_null() || config["kind"].is_null() {
            return Err(ApiError::bad_request(
                "apiVersion and kind must be set in an applied configuration",
            ));
        }
        let given = config["metadata"]["name"].as_str().unwrap_or_default();
        if given != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
        let gr = def.group_resource();
        let apply_key = (gr.clone(), key(ns, name), target != Target::Main);
        let mut applied = self.applied.get(&apply_key).cloned().unwrap_or_default();
        let existing = self.stored(&gr, &key(ns, name)).cloned();
        let live = match (&existing, target) {
            (Some(e), _) => e.clone(),
            (None, Target::Status | Target::Finalize | Target::Approval) => {
                return Err(ApiError::not_found(def, name))
            }
            (None, Target::Main) => json!({}),
        };
        let mut object = patch::server_side_apply(&live, &config, manager, &mut applied, options.force)
            .map_err(|conflicts| {
                let causes: Vec<Value> = conflicts
                    .iter()
                    .map(|c| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {:?}", c.manager), "field": c.field}))
                    .collect();
                let list: Vec<String> = conflicts
                    .iter()
                    .map(|c| format!("conflict with {:?}: {}", c.manager, c.field))
                    .collect();
                let plural = if conflicts.len() == 1 { "" } else { "s" };
                let mut e = ApiError::new(
                    409,
                    "Conflict",
                    format!("Apply failed with {} conflict{plural}: {}", conflicts.len(), list.join("\n")),
                );
                e.details = Some(json!({"name": name, "group": def.group, "kind": def.plural, "causes": causes}));
                e
            })?;
        let result = match existing {
            None => {
                if let Some(meta) = object["metadata"].as_object_mut() {
                    meta.remove("resourceVersion");
                }
                if let (true, Some(requester)) = (csr::is_csr(def), who.requester) {
                    csr::prepare_create(&mut object, requester);
                }
                self.create_object(def, ns, object, who).map(|o| (o, true))
            }
            Some(existing) => {
                if rv_of(&config).is_none() {
                    object["metadata"]["resourceVersion"] =
                        existing["metadata"]["resourceVersion"].clone();
                }
                self.update_object(def, ns, name, object, target, who)
                    .map(|o| (o, false))
            }
        };
        if result.is_ok() {
            self.applied.insert(apply_key, applied);
        }
        result
    }

    /// DELETE, as the generic registry's `Store.Delete`
    /// (`staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`)
    /// and, for namespaces, `REST.Delete`
    /// (`pkg/registry/core/namespace/storage/storage.go`) make it: options
    /// checked and preconditions held ([`deletion`]); NamespaceLifecycle's
    /// refusal of the immortal namespaces; the garbage-collection
    /// finalizers the propagation policy asks for; then gone, or — while
    /// finalizers remain — marked (`deletionTimestamp`, generation bumped
    /// once) and kept. A namespace is first marked and made `Terminating`
    /// (the namespace controller, run above this store, empties it and
    /// takes the `kubernetes` finalizer away); a namespace still
    /// holding `spec.finalizers` is answered as it is.
    pub fn delete(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        name: &str,
        options: &Value,
    ) -> Result<Value, ApiError> {
        self.delete_by(def, namespace, name, options, Deleter::default())
    }

    /// [`World::delete`] of a client's request by `deleter`, which
    /// admission ([`World::admit_delete`]) is told of.
    pub fn delete_by(
        &mut self,
        def: &ResourceDef,
        namespace: Option<&str>,
        name: &str,
        options: &Value,
        deleter: Deleter<'_>,
    ) -> Result<Value, ApiError> {
        let ns = namespace.filter(|_| def.namespaced);
        lifecycle::admit_delete(def, name)?;
        let existing = self.get(def, ns, name)?;
        let gc = deletion::parse(options)?;
        let pre = &options["preconditions"];
        let is_namespace = !def.custom && def.group.is_empty() && def.plural == "namespaces";
        let stored_uid = existing["metadata"]["uid"].as_str().unwrap_or_default();
        let stored_rv = rv_of(&existing).unwrap_or_default();
        if let Some(uid) = pre["uid"].as_str() {
            if uid != stored_uid {
                let why = if is_namespace {
                    format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {stored_uid}")
                } else {
                    format!("the UID in the precondition ({uid}) does not match the UID in record ({stored_uid}). The object might have been deleted and then recreated")
                };
                return Err(ApiError::conflict(def, name, &why));
            }
        }
        if let Some(rv) = pre["resourceVersion"].as_str() {
            if rv != stored_rv {
                let why = if is_namespace {
                    format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {stored_rv}")
                } else {
                    format!("the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({stored_rv}). The object might have been modified")
                };
                return Err(ApiError::conflict(def, name, &why));
            }
        }
        self.admit_delete(def, &existing, deleter)?;
        let gr = def.group_resource();
        if !def.custom
            && def.group == crate::builtin::APIEXTENSIONS
            && def.plural == crate::builtin::CRDS
        {
            if let Some(marked) = crate::crd_conditions::mark_for_deletion(&existing, &now()) {
                return Ok(self.commit(&gr, marked, Some(existing), false));
            }
        }
        let current = deletion::finalizer_names(&existing);
        let wanted = deletion::gc_finalizers(&gc, &current);
        if is_namespace {
            if existing["metadata"]["deletionTimestamp"].is_string() {
                if !lifecycle::spec_finalized(&existing) || !current.is_empty() {
                    return Ok(existing);
                }
                return Ok(self.commit(&gr, existing.clone(), Some(existing), true));
            }
            let mut marked = existing.clone();
            marked["metadata"]["deletionTimestamp"] = json!(now());
            marked["status"]["phase"] = json!("Terminating");
            if let Some(finalizers) = wanted {
                marked["metadata"]["finalizers"] = json!(finalizers);
            }
            return Ok(self.commit(&gr, marked, Some(existing), false));
        }
        let finalizers = wanted.clone().unwrap_or(current);
        if finalizers.is_empty() {
            return Ok(self.commit(&gr, existing.clone(), Some(existing), true));
        }
        let mut marked = existing.clone();
        if wanted.is_some() {
            marked["metadata"]["finalizers"] = json!(finalizers);
        }
        deletion::mark_as_deleting(&mut marked, &now());
        if marked == existing {
            return Ok(existing);
        }
        Ok(self.commit(&gr, marked, Some(existing), false))
    }

    /// DELETE with a propagation policy and a uid precondition, as the
    /// in-process controllers send it.
    pub fn delete_with(
        &mut self,
        def: &ResourceDef,
        object: &Value,
        policy: Propagation,
    ) -> Result<Value, ApiError> {
        let mut options = policy.options();
        options["preconditions"] = json!({"uid": object["metadata"]["uid"]});
        let ns = object["metadata"]["namespace"].as_str();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        self.delete(def, ns, name, &options)
    }

    /// The stored objects of a resource (all namespaces), in key order.
    pub fn list_objects(&self, gr: &GroupResource) -> Vec<Value> {
        self.objects
            .get(gr)
            .map(|o| o.values().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin;
    use crate::crd::{liqo_crd_dir, read_crd_dir};

    fn world() -> World {
        let mut registry = Registry::default();
        for def in builtin::definitions() {
            registry.register(def);
        }
        for def in read_crd_dir(&liqo_crd_dir("v1.2.0")).unwrap() {
            registry.register(def);
        }
        let (tx, _) = broadcast::channel(16);
        let mut world = World::new(registry, tx);
        let ns = world
            .registry
            .get(&GroupResource::new("", "namespaces"))
            .unwrap();
        world
            .create(&ns, None, json!({"metadata": {"name": "default"}}))
            .unwrap();
        world
    }

    fn def(world: &World, group: &str, plural: &str) -> Arc<ResourceDef> {
        world
            .registry
            .get(&GroupResource::new(group, plural))
            .unwrap()
    }

    fn slice(name: &str) -> Value {
        json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
               "metadata": {"name": name}, "spec": {"class": "default", "resources": {"cpu": "2"}},
               "status": {"resources": {"cpu": "1"}}})
    }

    #[test]
    fn create_sets_server_fields_and_drops_status() {
        let mut w = world();
        let slices = def(&w, "authentication.liqo.io", "resourceslices");
        let created = w.create(&slices, Some("default"), slice("a")).unwrap();
        assert_eq!(created["metadata"]["generation"], 1);
        assert_eq!(created["metadata"]["namespace"], "default");
        assert!(created["metadata"]["uid"].is_string());
        assert!(created["metadata"]["creationTimestamp"].is_string());
        assert!(created.get("status").is_none(), "status is a subresource");
        assert_eq!(
            w.create(&slices, Some("default"), slice("a"))
                .unwrap_err()
                .reason,
            "AlreadyExists"
        );
        assert_eq!(
            w.create(&slices, Some("nowhere"), slice("b"))
                .unwrap_err()
                .code,
            404
        );
        let mut generated = slice("");
        generated["metadata"] = json!({"generateName": "rs-"});
        let named = w.create(&slices, Some("default"), generated).unwrap();
        let name = named["metadata"]["name"].as_str().unwrap();
        assert!(name.starts_with("rs-") && name.len() == 8, "{name}");
        let mut bad = slice("BAD");
        bad["spec"]["resources"]["cpu"] = json!("lots");
        let e = w.create(&slices, Some("default"), bad).unwrap_err();
        assert_eq!(e.code, 422);
        let causes = e.details.unwrap()["causes"].clone();
        let fields: Vec<&str> = causes
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["field"].as_str().unwrap())
            .collect();
        assert_eq!(fields, ["metadata.name", "spec.resources.cpu"]);
    }

    #[test]
    fn updates_check_versions_keep_status_and_bump_generation() {
        let mut w = world();
        let slices = def(&w, "authentication.liqo.io", "resourceslices");
        let created = w.create(&slices, Some("default"), slice("a")).unwrap();
        let mut stale = created.clone();
        stale["metadata"]["resourceVersion"] = json!("1");
        assert_eq!(
            w.update(&slices, Some("default"), "a", stale, Target::Main)
                .unwrap_err()
                .code,
            409
        );
        let mut no_rv = created.clone();
        no_rv["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        assert_eq!(
            w.update(&slices, Some("default"), "a", no_rv, Target::Main)
                .unwrap_err()
                .code,
            422
        );

        // Status through /status only; generation untouched.
        let mut with_status = created.clone();
        with_status["status"] = json!({"resources": {"cpu": "1"}});
        with_status["spec"]["class"] = json!("ignored");
        let after = w
            .update(
                &slices,
                Some("default"),
                "a",
                with_status.clone(),
                Target::Status,
            )
            .unwrap();
        assert_eq!(after["status"]["resources"]["cpu"], "1");
        assert_eq!(after["spec"]["class"], "default");
        assert_eq!(after["metadata"]["generation"], 1);
        // A main write ignores status and bumps generation on spec changes.
        let mut main = after.clone();
        main["status"] = json!({});
        main["spec"]["class"] = json!("big");
        let after = w
            .update(&slices, Some("default"), "a", main, Target::Main)
            .unwrap();
        assert_eq!(after["status"]["resources"]["cpu"], "1");
        assert_eq!(after["metadata"]["generation"], 2);
        // Labels alone do not.
        let mut labelled = after.clone();
        labelled["metadata"]["labels"] = json!({"x": "y"});
        let after = w
            .update(&slices, Some("default"), "a", labelled, Target::Main)
            .unwrap();
        assert_eq!(after["metadata"]["generation"], 2);
        // A no-op write keeps the resourceVersion.
        let rv = after["metadata"]["resourceVersion"].clone();
        let same = w
            .update(&slices, Some("default"), "a", after, Target::Main)
            .unwrap();
        assert_eq!(same["metadata"]["resourceVersion"], rv);
    }

    #[test]
    fn finalizers_hold_deletion_until_the_last_goes() {
        let mut w = world();
        let slices = def(&w, "authentication.liqo.io", "resourceslices");
        let mut body = slice("a");
        body["metadata"]["finalizers"] = json!(["liqo.io/x"]);
        w.create(&slices, Some("default"), body).unwrap();
        let marked = w
            .delete(&slices, Some("default"), "a", &Value::Null)
            .unwrap();
        assert!(marked["metadata"]["deletionTimestamp"].is_string());
        assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 0);
        let mut more = marked.clone();
        more["metadata"]["finalizers"] = json!(["liqo.io/x", "other.io/y"]);
        assert_eq!(
            w.update(&slices, Some("default"), "a", more, Target::Main)
                .unwrap_err()
                .code,
            422
        );
        let mut done = marked.clone();
        done["metadata"]["finalizers"] = json!([]);
        w.update(&slices, Some("default"), "a", done, Target::Main)
            .unwrap();
        assert_eq!(w.get(&slices, Some("default"), "a").unwrap_err().code, 404);
        let last = w.history.last().unwrap();
        assert!(last.deleted);
    }

    #[test]
    fn patches_by_type() {
        let mut w = world();
        let slices = def(&w, "authentication.liqo.io", "resourceslices");
        w.create(&slices, Some("default"), slice("a")).unwrap();
        let opts = PatchOptions::default();
        let (patched, _) = w
            .patch(
                &slices,
                Some("default"),
                "a",
                PatchType::Merge,
                br#"{"spec": {"class": "x"}}"#,
                Target::Main,
                &opts,
            )
            .unwrap();
        assert_eq!(patched["spec"]["class"], "x");
        let e = w
            .patch(
                &slices,
                Some("default"),
                "a",
                PatchType::Strategic,
                b"{}",
                Target::Main,
                &opts,
            )
            .unwrap_err();
        assert_eq!(e.code, 415);
        let e = w
            .patch(
                &slices,
                Some("default"),
                "a",
                PatchType::Merge,
                br#"{"metadata": {"resourceVersion": "1"}}"#,
                Target::Main,
                &opts,
            )
            .unwrap_err();
        assert_eq!(e.code, 409);
        let e = w
            .patch(
                &slices,
                Some("default"),
                "a",
                PatchType::Merge,
                br#"{"status": {"conditions": [{"type": "Nope", "status": "Accepted"}]}}"#,
                Target::Status,
                &opts,
            )
            .unwrap_err();
        assert_eq!(e.code, 422);
        let apply = PatchOptions {
            field_manager: Some("ctrl".into()),
            force: true,
        };
        let config = br#"{"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
                          "metadata": {"name": "b", "namespace": "default"}, "spec": {"class": "y"}}"#;
        let (made, created) = w
            .patch(
                &slices,
                Some("default"),
                "b",
                PatchType::Apply,
                config,
                Target::Main,
                &apply,
            )
            .unwrap();
        assert!(created);
        assert_eq!(made["spec"]["class"], "y");
        let e = w
            .patch(
                &slices,
                Some("default"),
                "b",
                PatchType::Apply,
                config,
                Target::Main,
                &opts,
            )
            .unwrap_err();
        assert_eq!(e.code, 422, "no fieldManager");
    }
}
