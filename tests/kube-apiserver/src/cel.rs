//! CEL expressions as the real API server compiles and runs them for
//! `x-kubernetes-validations` (and, later, ValidatingAdmissionPolicies),
//! on the `cel` crate (the maintained successor of `cel-interpreter`).
//!
//! The real server type-checks every expression when a CRD is written and
//! refuses one it cannot compile. `cel` has no type checker, so this module
//! checks what it can instead: the expression parses, every name it reads
//! is a declared variable (`self`, `oldSelf`, or one a macro binds), and
//! every function it calls is one this environment evaluates. Anything
//! else is a [`CelError`], which makes the CRD's registration fail: a rule
//! this server would not enforce is never silently skipped.
//!
//! The environment: CEL's standard library and macros and the strings
//! extension (`ext.Strings` of cel-go), which Kubernetes' base environment
//! also has (`k8s.io/apiserver/pkg/cel/environment/base.go`). Kubernetes'
//! own libraries (quantity, URL, IP, CIDR, semver, authz, regex `find`,
//! lists `isSorted`/`sum`…) are not here: no loaded CRD uses them, and a
//! rule that does is refused at registration, naming the function.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use ::cel::common::ast::{EntryExpr, Expr, IdedExpr};
use ::cel::{Context, Env, Program};

/// A value an expression evaluates to.
pub use ::cel::Value as CelValue;
use serde_json::Value;

/// Why an expression cannot be evaluated here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    #[error("compilation failed: {0}")]
    Syntax(String),
    #[error("undeclared reference to '{0}'")]
    UndeclaredVariable(String),
    #[error("function '{0}' is not evaluated by this server")]
    UnsupportedFunction(String),
}

/// The conversion functions, each named after the type it converts to: a
/// name both a function ([`FUNCTIONS`]) and a type name ([`TYPE_NAMES`]).
const CONVERSIONS: &[&str] = &["int", "uint", "double", "string", "bool", "bytes"];

/// The functions (and operators, by their CEL names) the environment
/// evaluates besides [`CONVERSIONS`]. A test
/// ([`tests::every_listed_function_evaluates`]) runs each.
const FUNCTIONS: &[&str] = &[
    // Operators.
    "_?_:_",
    "_&&_",
    "_||_",
    "!_",
    "_-_",
    "_+_",
    "_*_",
    "_/_",
    "_%_",
    "_==_",
    "_!=_",
    "_>=_",
    "_<=_",
    "_>_",
    "_<_",
    "-_",
    "_[_]",
    "@in",
    "@not_strictly_false",
    // Standard functions.
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "dyn",
    "type",
    "duration",
    "timestamp",
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getFullYear",
    "getHours",
    "getMilliseconds",
    "getMinutes",
    "getMonth",
    "getSeconds",
    // The strings extension.
    "charAt",
    "indexOf",
    "lastIndexOf",
    "join",
    "lowerAscii",
    "upperAscii",
    "trim",
    "replace",
    "split",
    "substring",
    "format",
    "reverse",
];

/// Type names an expression may name as values (`type(x) == string`),
/// besides [`CONVERSIONS`].
const TYPE_NAMES: &[&str] = &["list", "map", "null_type", "type"];

fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // Declaring a standard extension on a fresh stdlib cannot clash; if
        // it ever did, the functions are missing and every rule using them
        // fails to evaluate, which the tests show.
        let _ = env.add_extension(::cel::extensions::strings);
        Arc::new(env)
    })
    .clone()
}

/// A checked expression, ready to run.
pub struct Compiled {
    program: Program,
    /// The variables it reads (`self`, `oldSelf`, `object`…).
    variables: BTreeSet<String>,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("variables", &self.variables)
            .finish()
    }
}

impl Compiled {
    /// Whether it reads `name` (a transition rule reads `oldSelf`).
    pub fn uses(&self, name: &str) -> bool {
        self.variables.contains(name)
    }

    /// Run it with `variables` bound (JSON values as CEL values).
    pub fn eval(&self, variables: &[(&str, &Value)]) -> Result<CelValue, String> {
        let mut context = Context::with_env(env());
        for (name, value) in variables {
            context.add_variable_from_value(*name, to_cel(value));
        }
        self.program.execute(&context).map_err(|e| e.to_string())
    }
}

/// A JSON value as the real server hands it to CEL
/// (`UnstructuredToVal`): integers are `int` (int64), never `uint`.
pub fn to_cel(value: &Value) -> CelValue {
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => CelValue::Int(i),
            None => CelValue::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => CelValue::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => {
            let entries: std::collections::HashMap<String, CelValue> =
                map.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            CelValue::from(entries)
        }
    }
}

/// Compile `text`, allowing the free variables `declared`.
pub fn compile(text: &str, declared: &[&str]) -> Result<Compiled, CelError> {
    let program = env()
        .compile(text)
        .map_err(|e| CelError::Syntax(e.to_string()))?;
    let mut free = BTreeSet::new();
    let mut functions = BTreeSet::new();
    walk(
        program.expression(),
        &mut Vec::new(),
        &mut free,
        &mut functions,
    );
    for name in &free {
        if !declared.contains(&name.as_str())
            && !TYPE_NAMES.contains(&name.as_str())
            && !CONVERSIONS.contains(&name.as_str())
        {
            return Err(CelError::UndeclaredVariable(name.clone()));
        }
    }
    for function in &functions {
        if !FUNCTIONS.contains(&function.as_str()) && !CONVERSIONS.contains(&function.as_str()) {
            return Err(CelError::UnsupportedFunction(function.clone()));
        }
    }
    let variables = free
        .into_iter()
        .filter(|n| declared.contains(&n.as_str()))
        .collect();
    Ok(Compiled { program, variables })
}

/// Collect the free identifiers and the called functions of `e`; `bound`
/// holds the names comprehensions (macros) bind around it.
fn walk(
    e: &IdedExpr,
    bound: &mut Vec<String>,
    free: &mut BTreeSet<String>,
    functions: &mut BTreeSet<String>,
) {
    match &e.expr {
        Expr::Unspecified | Expr::Literal(_) => {}
        Expr::Ident(name) => {
            if !name.starts_with('@') && !bound.contains(name) {
                free.insert(name.clone());
            }
        }
        Expr::Call(call) => {
            functions.insert(call.func_name.clone());
            if let Some(target) = &call.target {
                walk(target, bound, free, functions);
            }
            for arg in &call.args {
                walk(arg, bound, free, functions);
            }
        }
        Expr::Select(select) => walk(&select.operand, bound, free, functions),
        Expr::List(list) => {
            for element in &list.elements {
                walk(element, bound, free, functions);
            }
        }
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(entry) = &entry.expr {
                    walk(&entry.key, bound, free, functions);
                    walk(&entry.value, bound, free, functions);
                }
            }
        }
        Expr::Struct(s) => {
            functions.insert(format!("struct {}", s.type_name));
        }
        Expr::Comprehension(c) => {
            walk(&c.iter_range, bound, free, functions);
            let depth = bound.len();
            bound.push(c.accu_var.clone());
            walk(&c.accu_init, bound, free, functions);
            bound.push(c.iter_var.clone());
            if let Some(v2) = &c.iter_var2 {
                bound.push(v2.clone());
            }
            walk(&c.loop_cond, bound, free, functions);
            walk(&c.loop_step, bound, free, functions);
            walk(&c.result, bound, free, functions);
            bound.truncate(depth);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(text: &str, this: Value) -> CelValue {
        compile(text, &["self"])
            .unwrap()
            .eval(&[("self", &this)])
            .unwrap()
    }

    #[test]
    fn every_listed_function_evaluates() {
        // One expression per listed function, each true.
        let cases = [
            "self.n > 1 ? true : false",
            "!(self.n == 1) && (self.n != 1 || false)",
            "self.n - 1 + 1 == self.n * 1 && self.n / 1 % 3 == 2",
            "self.n >= 2 && self.n <= 2 && -self.n < 0",
            "self.l[0] == 'a' && 'a' in self.l",
            "self.l.all(x, x.size() == 1) && self.l.exists(x, x == 'b')",
            "size(self.s) == 5 && self.s.contains('ll') && self.s.startsWith('he') && self.s.endsWith('lo')",
            "self.s.matches('^h.*o$')",
            "int('3') == 3 && uint(3) == 3u && double(1) == 1.0 && string(1) == '1' && bool('true')",
            "bytes('a') == b'a' && dyn(1) == 1 && type(1) == int",
            "duration('1s') < duration('2s') && timestamp('2024-01-02T03:04:05Z').getFullYear() == 2024",
            "timestamp('2024-01-02T03:04:05Z').getMonth() == 0 && timestamp('2024-01-02T03:04:05Z').getDate() == 2",
            "timestamp('2024-01-02T03:04:05Z').getDayOfMonth() == 1 && timestamp('2024-01-02T03:04:05Z').getDayOfWeek() == 2",
            "timestamp('2024-01-02T03:04:05Z').getDayOfYear() == 1 && timestamp('2024-01-02T03:04:05Z').getHours() == 3",
            "timestamp('2024-01-02T03:04:05Z').getMinutes() == 4 && timestamp('2024-01-02T03:04:05Z').getSeconds() == 5",
            "timestamp('2024-01-02T03:04:05Z').getMilliseconds() == 0",
            "has(self.s) && !has(self.missing)",
            "self.s.charAt(0) == 'h' && self.s.indexOf('l') == 2 && self.s.lastIndexOf('l') == 3",
            "self.l.join('-') == 'a-b' && self.s.upperAscii().lowerAscii() == 'hello'",
            "' x '.trim() == 'x' && self.s.replace('l', 'L') == 'heLLo' && self.s.split('l').size() == 3",
            "self.s.substring(1, 3) == 'el' && '%s'.format(['x']) == 'x' && 'ab'.reverse() == 'ba'",
        ];
        let this = json!({"n": 2, "l": ["a", "b"], "s": "hello"});
        let mut used = BTreeSet::new();
        for case in cases {
            assert_eq!(run(case, this.clone()), CelValue::Bool(true), "{case}");
            let compiled = env().compile(case).unwrap();
            let mut free = BTreeSet::new();
            walk(compiled.expression(), &mut Vec::new(), &mut free, &mut used);
        }
        let missing: Vec<_> = FUNCTIONS
            .iter()
            .chain(CONVERSIONS)
            .filter(|f| !used.contains(**f))
            .collect();
        assert!(missing.is_empty(), "listed but never run: {missing:?}");
    }

    #[test]
    fn what_cannot_be_evaluated_is_refused_at_compile_time() {
        assert!(matches!(
            compile("self.x ==", &["self"]),
            Err(CelError::Syntax(_))
        ));
        assert_eq!(
            compile("object.x == 1", &["self"]).unwrap_err(),
            CelError::UndeclaredVariable("object".into())
        );
        assert_eq!(
            compile("quantity(self) == quantity('1')", &["self"]).unwrap_err(),
            CelError::UnsupportedFunction("quantity".into())
        );
        assert_eq!(
            compile("self.l.isSorted()", &["self"]).unwrap_err(),
            CelError::UnsupportedFunction("isSorted".into())
        );
        let ok = compile("self.l.all(x, x != oldSelf)", &["self", "oldSelf"]).unwrap();
        assert!(ok.uses("oldSelf") && ok.uses("self") && !ok.uses("x"));
    }
}
