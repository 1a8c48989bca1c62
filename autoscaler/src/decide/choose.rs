//! Choosing the plans to buy: pods packed into plans (bins with a price),
//! inside limits on the total bought, cheapest first.
//!
//! Everything here is integers: resources in thousandths (requests rounded
//! up, capacities down — see `run.rs`), money in nano-units.
//!
//! - [`greedy`]: repeatedly buys the plan that packs the remaining pods
//!   (first fit, in order) at the lowest cost per unit of what it packs
//!   (`Cheapest`), or with the least idle cpu and memory (`LeastWaste`),
//!   then moves each bin to the cheapest (least idle) plan that still holds
//!   its pods. Time `O(bins × plans × pod groups × resources)`: pods with
//!   the same requests and the same admissible plans are one group.
//! - [`solve`] with `Cheapest`: branch and bound over pods (largest
//!   first), each put in an open bin or a new bin of some plan, or left
//!   out, minimising (pods left out, cost per hour, cost this month). It
//!   starts from the greedy answer, runs only for at most
//!   [`EXACT_MAX_PODS`] pods and stops after [`EXACT_NODE_LIMIT`] nodes:
//!   the answer is then the best found ([`Search::Bounded`]), never worse
//!   than the greedy one.
//! - Tiers (`Priority`): the pods go to the first tier's plans first; what
//!   it cannot take goes on to the next.

use std::collections::HashMap;

use super::Search;

/// Nodes the exact search may visit before it settles for the best found.
pub const EXACT_NODE_LIMIT: u64 = 100_000;
/// Above this many pods to buy for, only the greedy heuristic runs.
pub const EXACT_MAX_PODS: usize = 24;

/// A capacity without bound (a plan that does not sell `pods`).
pub const UNBOUNDED: i128 = i128::MAX;

/// What a chosen set is measured by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Objective {
    Cost,
    Waste,
}

/// One plan, as the packing sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanType {
    /// Per dimension; [`UNBOUNDED`] where it sets no bound.
    pub cap: Vec<i128>,
    /// What it counts against `limits.resources`, per dimension.
    pub sell: Vec<i128>,
    /// Cost per hour, nano-units.
    pub hour: i128,
    /// What it adds to this month's spend, nano-units.
    pub month: i128,
    /// Priority tier (lower first); 0 for every plan without `Priority`.
    pub tier: u32,
}

/// One pod to place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodItem {
    pub need: Vec<i128>,
    /// Per plan type: may it run there (labels, taints)?
    pub admitted: Vec<bool>,
    pub priority: i32,
}

/// What is left under each limit (`None`: no limit).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headroom {
    pub res: Vec<Option<i128>>,
    pub contracts: Option<u64>,
    pub hour: Option<i128>,
    pub month: Option<i128>,
}

#[derive(Debug, Clone)]
pub struct Problem {
    pub types: Vec<PlanType>,
    pub pods: Vec<PodItem>,
    pub headroom: Headroom,
    pub objective: Objective,
    /// Resource dimensions that count as waste (cpu and memory).
    pub waste_dims: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bin {
    pub ty: usize,
    pub pods: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Solution {
    pub bins: Vec<Bin>,
    pub hour: i128,
    pub month: i128,
    pub search: Search,
}

impl Solution {
    pub fn covered(&self) -> usize {
        self.bins.iter().map(|b| b.pods.len()).sum()
    }
}

/// Running totals of a set of bins against the headroom.
#[derive(Debug, Clone, Default)]
struct Usage {
    res: Vec<i128>,
    contracts: u64,
    hour: i128,
    month: i128,
}

impl Usage {
    fn new(dims: usize) -> Self {
        Usage {
            res: vec![0; dims],
            ..Usage::default()
        }
    }
    fn fits(&self, t: &PlanType, h: &Headroom) -> bool {
        h.contracts.is_none_or(|c| self.contracts < c)
            && h.hour.is_none_or(|m| self.hour.saturating_add(t.hour) <= m)
            && h.month
                .is_none_or(|m| self.month.saturating_add(t.month) <= m)
            && h.res
                .iter()
                .zip(&self.res)
                .zip(&t.sell)
                .all(|((limit, used), sell)| limit.is_none_or(|l| used.saturating_add(*sell) <= l))
    }
    fn add(&mut self, t: &PlanType) {
        self.contracts += 1;
        self.hour = self.hour.saturating_add(t.hour);
        self.month = self.month.saturating_add(t.month);
        for (u, s) in self.res.iter_mut().zip(&t.sell) {
            *u = u.saturating_add(*s);
        }
    }
    fn remove(&mut self, t: &PlanType) {
        self.contracts -= 1;
        self.hour = self.hour.saturating_sub(t.hour);
        self.month = self.month.saturating_sub(t.month);
        for (u, s) in self.res.iter_mut().zip(&t.sell) {
            *u = u.saturating_sub(*s);
        }
    }
}

fn dims(p: &Problem) -> usize {
    p.pods
        .first()
        .map(|x| x.need.len())
        .or_else(|| p.types.first().map(|t| t.cap.len()))
        .unwrap_or(0)
}

/// How many pods of `need` fit in `room` (`max` when nothing bounds it).
fn how_many(room: &[i128], need: &[i128], max: usize) -> usize {
    let mut k = max as i128;
    for (r, n) in room.iter().zip(need) {
        if *n > 0 && *r != UNBOUNDED {
            k = k.min(r / n);
        }
    }
    usize::try_from(k.max(0)).unwrap_or(0)
}

fn take(room: &mut [i128], need: &[i128], k: usize) {
    for (r, n) in room.iter_mut().zip(need) {
        if *r != UNBOUNDED {
            *r -= n.saturating_mul(k as i128);
        }
    }
}

fn fits(room: &[i128], need: &[i128]) -> bool {
    room.iter()
        .zip(need)
        .all(|(r, n)| *r == UNBOUNDED || n <= r)
}

/// Idle cpu and memory of a plan holding `used`, in millionths of its size
/// (summed over the waste dimensions).
fn waste(t: &PlanType, used: &[i128], dims: &[usize]) -> i128 {
    dims.iter()
        .filter(|d| t.cap[**d] != UNBOUNDED && t.cap[**d] > 0)
        .map(|d| (t.cap[*d] - used[*d]).max(0).saturating_mul(1_000_000) / t.cap[*d])
        .sum()
}

/// Identical pods (same requests, same admissible plans) as one group.
struct Group {
    need: Vec<i128>,
    row: usize,
    pods: Vec<usize>,
    weight: i128,
    priority: i32,
}

fn groups(p: &Problem, pods: &[usize]) -> Vec<Group> {
    let d = dims(p);
    // Each dimension's scale: the largest bounded capacity offered.
    let scale: Vec<i128> = (0..d)
        .map(|i| {
            p.types
                .iter()
                .map(|t| t.cap[i])
                .filter(|c| *c != UNBOUNDED)
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut index: HashMap<(&[i128], &[bool]), usize> = HashMap::new();
    let mut out: Vec<Group> = Vec::new();
    for &i in pods {
        let pod = &p.pods[i];
        let g = *index
            .entry((pod.need.as_slice(), pod.admitted.as_slice()))
            .or_insert_with(|| {
                let weight = pod
                    .need
                    .iter()
                    .zip(&scale)
                    .filter(|(_, s)| **s > 0)
                    .map(|(n, s)| n.saturating_mul(1_000_000) / s)
                    .sum::<i128>()
                    .max(1);
                out.push(Group {
                    need: pod.need.clone(),
                    row: i,
                    pods: Vec::new(),
                    weight,
                    priority: pod.priority,
                });
                out.len() - 1
            });
        out[g].pods.push(i);
        out[g].priority = out[g].priority.max(pod.priority);
    }
    // Higher priority first, then larger first: first fit decreasing.
    out.sort_by(|a, b| b.priority.cmp(&a.priority).then(b.weight.cmp(&a.weight)));
    out
}

/// What one fresh bin of a plan would pack, first fit over the groups.
fn fill(
    p: &Problem,
    t: usize,
    groups: &[Group],
    left: &[usize],
) -> (Vec<(usize, usize)>, i128, Vec<i128>) {
    let ty = &p.types[t];
    let mut room = ty.cap.clone();
    let mut packed = Vec::new();
    let mut value = 0i128;
    for (g, group) in groups.iter().enumerate() {
        if left[g] == 0 || !p.pods[group.row].admitted[t] {
            continue;
        }
        let k = how_many(&room, &group.need, left[g]);
        if k > 0 {
            take(&mut room, &group.need, k);
            packed.push((g, k));
            value = value.saturating_add(group.weight.saturating_mul(k as i128));
        }
    }
    let used: Vec<i128> = ty
        .cap
        .iter()
        .zip(&room)
        .map(|(c, r)| if *c == UNBOUNDED { 0 } else { c - r })
        .collect();
    (packed, value, used)
}

/// A plan and what a fresh bin of it packs: `(type, [(group, count)],
/// value packed, idle share)`.
type Pick = (usize, Vec<(usize, usize)>, i128, i128);

/// The greedy heuristic over `pods` (indices into `p.pods`), adding to
/// `usage`; returns the bins.
fn greedy_into(p: &Problem, pods: &[usize], types: &[usize], usage: &mut Usage) -> Vec<Bin> {
    let groups = groups(p, pods);
    let mut left: Vec<usize> = groups.iter().map(|g| g.pods.len()).collect();
    let mut bins = Vec::new();
    loop {
        if left.iter().all(|l| *l == 0) {
            break;
        }
        let mut best: Option<Pick> = None;
        for &t in types {
            let ty = &p.types[t];
            if !usage.fits(ty, &p.headroom) {
                continue;
            }
            let (packed, value, used) = fill(p, t, &groups, &left);
            if packed.is_empty() {
                continue;
            }
            let better = match (&best, p.objective) {
                (None, _) => true,
                (Some((bt, _, bvalue, _)), Objective::Cost) => {
                    let b = &p.types[*bt];
                    // hour / value, lower is better; ties: more packed.
                    let lhs = ty.hour.saturating_mul(*bvalue);
                    let rhs = b.hour.saturating_mul(value);
                    lhs < rhs || (lhs == rhs && value > *bvalue)
                }
                (Some((bt, _, _, bwaste)), Objective::Waste) => {
                    let w = waste(ty, &used, &p.waste_dims);
                    w < *bwaste || (w == *bwaste && ty.hour < p.types[*bt].hour)
                }
            };
            if better {
                let w = waste(ty, &used, &p.waste_dims);
                best = Some((t, packed, value, w));
            }
        }
        let Some((t, packed, _, _)) = best else {
            break;
        };
        usage.add(&p.types[t]);
        let mut bin = Bin {
            ty: t,
            pods: Vec::new(),
        };
        for (g, k) in packed {
            let start = groups[g].pods.len() - left[g];
            bin.pods
                .extend_from_slice(&groups[g].pods[start..start + k]);
            left[g] -= k;
        }
        bins.push(bin);
    }
    resize(p, &mut bins, types, usage);
    bins
}

/// Moves each bin to the cheapest plan (least idle, with `LeastWaste`)
/// that admits and holds its pods within the limits.
fn resize(p: &Problem, bins: &mut [Bin], types: &[usize], usage: &mut Usage) {
    let d = dims(p);
    for bin in bins.iter_mut() {
        let mut need = vec![0i128; d];
        for &i in &bin.pods {
            for (n, x) in need.iter_mut().zip(&p.pods[i].need) {
                *n = n.saturating_add(*x);
            }
        }
        usage.remove(&p.types[bin.ty]);
        let key = |t: usize| {
            let ty = &p.types[t];
            match p.objective {
                Objective::Cost => (ty.hour, ty.month, 0),
                Objective::Waste => (waste(ty, &need, &p.waste_dims), ty.hour, ty.month),
            }
        };
        let mut best = bin.ty;
        for &t in types {
            let ty = &p.types[t];
            if key(t) < key(best)
                && fits(&ty.cap, &need)
                && bin.pods.iter().all(|&i| p.pods[i].admitted[t])
                && usage.fits(ty, &p.headroom)
            {
                best = t;
            }
        }
        bin.ty = best;
        usage.add(&p.types[best]);
    }
}

fn totals(p: &Problem, bins: Vec<Bin>, search: Search) -> Solution {
    let hour = bins
        .iter()
        .map(|b| p.types[b.ty].hour)
        .fold(0i128, i128::saturating_add);
    let month = bins
        .iter()
        .map(|b| p.types[b.ty].month)
        .fold(0i128, i128::saturating_add);
    Solution {
        bins,
        hour,
        month,
        search,
    }
}

/// The greedy heuristic alone, every plan in one tier.
pub fn greedy(p: &Problem) -> Solution {
    let pods: Vec<usize> = (0..p.pods.len()).collect();
    let types: Vec<usize> = (0..p.types.len()).collect();
    let mut usage = Usage::new(dims(p));
    let bins = greedy_into(p, &pods, &types, &mut usage);
    totals(p, bins, Search::Heuristic)
}

/// The plans to buy: tier by tier, each by the objective (exact search
/// where it is small enough, see the module's notes).
pub fn solve(p: &Problem) -> Solution {
    if p.pods.is_empty() {
        return Solution::default();
    }
    let mut tiers: Vec<u32> = p.types.iter().map(|t| t.tier).collect();
    tiers.sort_unstable();
    tiers.dedup();
    let mut usage = Usage::new(dims(p));
    let mut left: Vec<usize> = (0..p.pods.len()).collect();
    let mut bins = Vec::new();
    let mut search = Search::Trivial;
    for tier in tiers {
        if left.is_empty() {
            break;
        }
        let types = undominated(p, tier);
        let mut tier_bins = greedy_into(p, &left, &types, &mut usage);
        let mut how = Search::Heuristic;
        if p.objective == Objective::Cost && left.len() <= EXACT_MAX_PODS {
            for b in &tier_bins {
                usage.remove(&p.types[b.ty]);
            }
            let (found, finished) = exact(p, &left, &types, &usage, tier_bins);
            tier_bins = found;
            how = if finished {
                Search::Exact
            } else {
                Search::Bounded
            };
            for b in &tier_bins {
                usage.add(&p.types[b.ty]);
            }
        }
        search = match (search, how) {
            (Search::Trivial, h) => h,
            (Search::Exact, h) => h,
            (s, _) => s,
        };
        let covered: std::collections::HashSet<usize> = tier_bins
            .iter()
            .flat_map(|b| b.pods.iter().copied())
            .collect();
        left.retain(|i| !covered.contains(i));
        bins.extend(tier_bins);
    }
    totals(p, bins, search)
}

/// The plans of `tier` that no other plan of the tier beats outright
/// (holds at least as much everywhere, admits every pod it admits, costs
/// no more, counts no more against limits); of equal ones the first.
fn undominated(p: &Problem, tier: u32) -> Vec<usize> {
    let all: Vec<usize> = (0..p.types.len())
        .filter(|t| p.types[*t].tier == tier)
        .collect();
    // A larger plan for less can still waste more: with `LeastWaste` only
    // plans of the very same sizes compete on price.
    let same_size = p.objective == Objective::Waste;
    // Admission columns, each distinct one compared once.
    let mut ids: HashMap<Vec<bool>, usize> = HashMap::new();
    let mut columns: Vec<Vec<bool>> = Vec::new();
    let mut column_of = vec![0usize; p.types.len()];
    for &t in &all {
        let column: Vec<bool> = p.pods.iter().map(|x| x.admitted[t]).collect();
        let next = columns.len();
        let id = *ids.entry(column.clone()).or_insert(next);
        if id == next {
            columns.push(column);
        }
        column_of[t] = id;
    }
    let mut superset: HashMap<(usize, usize), bool> = HashMap::new();
    let mut admits_all = |b: usize, a: usize| {
        *superset
            .entry((b, a))
            .or_insert_with(|| columns[b].iter().zip(&columns[a]).all(|(x, y)| *x || !*y))
    };
    let mut beats = |b: usize, a: usize| {
        let (tb, ta) = (&p.types[b], &p.types[a]);
        tb.hour <= ta.hour
            && tb.month <= ta.month
            && (!same_size || tb.cap == ta.cap)
            && tb.cap.iter().zip(&ta.cap).all(|(x, y)| x >= y)
            && tb
                .sell
                .iter()
                .zip(&ta.sell)
                .zip(&p.headroom.res)
                .all(|((x, y), l)| l.is_none() || x <= y)
            && admits_all(column_of[b], column_of[a])
    };
    let mut kept = Vec::new();
    for &a in &all {
        // Out when beaten outright, or by an equal one listed earlier.
        let out = all
            .iter()
            .any(|&b| b != a && beats(b, a) && (b < a || !beats(a, b)));
        if !out {
            kept.push(a);
        }
    }
    kept
}

/// Branch and bound (see the module's notes). Returns the best bins and
/// whether the search finished (the answer is then proven the best).
fn exact(
    p: &Problem,
    pods: &[usize],
    types: &[usize],
    usage: &Usage,
    seed: Vec<Bin>,
) -> (Vec<Bin>, bool) {
    let mut order: Vec<usize> = pods.to_vec();
    let g = groups(p, pods);
    let weight: HashMap<usize, i128> = g
        .iter()
        .flat_map(|grp| grp.pods.iter().map(move |i| (*i, grp.weight)))
        .collect();
    order.sort_by(|a, b| {
        p.pods[*b]
            .priority
            .cmp(&p.pods[*a].priority)
            .then(weight[b].cmp(&weight[a]))
    });
    // New bins are tried cheapest first.
    let mut by_cost: Vec<usize> = types.to_vec();
    by_cost.sort_by_key(|t| (p.types[*t].hour, p.types[*t].month));
    let score = |bins: &[Bin], uncovered: usize| {
        let hour: i128 = bins.iter().map(|b| p.types[b.ty].hour).sum();
        let month: i128 = bins.iter().map(|b| p.types[b.ty].month).sum();
        (uncovered, hour, month, bins.len())
    };
    let seed_uncovered = pods.len() - seed.iter().map(|b| b.pods.len()).sum::<usize>();
    let mut search = Dfs {
        p,
        order: &order,
        types: &by_cost,
        best: score(&seed, seed_uncovered),
        best_bins: seed,
        nodes: 0,
        open: Vec::new(),
        usage: usage.clone(),
        hour: 0,
        month: 0,
    };
    search.go(0, 0);
    let finished = search.nodes <= EXACT_NODE_LIMIT;
    (search.best_bins, finished)
}

struct OpenBin {
    ty: usize,
    room: Vec<i128>,
    pods: Vec<usize>,
}

struct Dfs<'a> {
    p: &'a Problem,
    order: &'a [usize],
    types: &'a [usize],
    best: (usize, i128, i128, usize),
    best_bins: Vec<Bin>,
    nodes: u64,
    open: Vec<OpenBin>,
    usage: Usage,
    hour: i128,
    month: i128,
}

impl Dfs<'_> {
    fn go(&mut self, k: usize, uncovered: usize) {
        self.nodes += 1;
        if self.nodes > EXACT_NODE_LIMIT {
            return;
        }
        // Bound: every part of the score only grows along a path, so a
        // node already no better than the best has nothing better below.
        let now = (uncovered, self.hour, self.month, self.open.len());
        if now >= self.best {
            return;
        }
        if k == self.order.len() {
            if now < self.best {
                self.best = now;
                self.best_bins = self
                    .open
                    .iter()
                    .map(|b| Bin {
                        ty: b.ty,
                        pods: b.pods.clone(),
                    })
                    .collect();
            }
            return;
        }
        let i = self.order[k];
        let need = &self.p.pods[i].need;
        // 1. An open bin with room (identical open bins tried once).
        for b in 0..self.open.len() {
            let ob = &self.open[b];
            if !self.p.pods[i].admitted[ob.ty] || !fits(&ob.room, need) {
                continue;
            }
            if (0..b).any(|c| self.open[c].ty == ob.ty && self.open[c].room == ob.room) {
                continue;
            }
            take(&mut self.open[b].room, need, 1);
            self.open[b].pods.push(i);
            self.go(k + 1, uncovered);
            self.open[b].pods.pop();
            take(
                &mut self.open[b].room,
                &need.iter().map(|n| -n).collect::<Vec<_>>(),
                1,
            );
        }
        // 2. A new bin, cheapest plans first.
        for &t in self.types {
            let ty = &self.p.types[t];
            if !self.p.pods[i].admitted[t]
                || !fits(&ty.cap, need)
                || !self.usage.fits(ty, &self.p.headroom)
            {
                continue;
            }
            if uncovered == self.best.0
                && (
                    self.hour.saturating_add(ty.hour),
                    self.month.saturating_add(ty.month),
                ) >= (self.best.1, self.best.2)
            {
                // Costlier plans only get worse from here.
                break;
            }
            let mut room = ty.cap.clone();
            take(&mut room, need, 1);
            self.usage.add(ty);
            self.hour = self.hour.saturating_add(ty.hour);
            self.month = self.month.saturating_add(ty.month);
            self.open.push(OpenBin {
                ty: t,
                room,
                pods: vec![i],
            });
            self.go(k + 1, uncovered);
            self.open.pop();
            self.usage.remove(ty);
            self.hour = self.hour.saturating_sub(ty.hour);
            self.month = self.month.saturating_sub(ty.month);
        }
        // 3. Left out.
        self.go(k + 1, uncovered + 1);
    }
}
