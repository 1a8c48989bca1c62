//! Offers, plans, reservations and contracts as people read them: tables
//! and details, from the catalog's wire types. Costs and quantities are
//! printed as the catalog wrote them (exact decimals, Kubernetes
//! quantities), never rounded, with their unit when the catalog says it
//! (`1.5 EUR/hour`). Secrets are never printed here: a contract's
//! credentials are only named (`-o json|yaml` carries them).

use catalog_client::wire::{Contract, Cost, Offer, Pricing, Reservation};
use quantity::ResourceList;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::exit::{Code, Failure};
use crate::output::{details, Table};

/// `value` (the catalog's JSON) read as `T`, or why this client cannot.
pub fn read<T: DeserializeOwned>(what: &str, value: &Value) -> Result<T, Failure> {
    T::deserialize(value).map_err(|e| {
        Failure::new(
            Code::Error,
            format!("the catalog answered {what} this client cannot read: {e}"),
        )
    })
}

/// `name=quantity` pairs, comma-separated, in name order.
pub fn resources(list: &ResourceList) -> String {
    list.0
        .iter()
        .map(|(name, q)| format!("{name}={q}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// An enum as its JSON spelling (`v1`, `hard`, `cancelled`).
fn spelled<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

fn or_dash(text: String) -> String {
    if text.is_empty() {
        "-".to_string()
    } else {
        text
    }
}

/// A cost with its unit, `1.5 EUR/hour`: the exact decimal as the cost
/// prints it (never through a float), then the catalog's `pricing`. A
/// catalog older than `pricing` says no unit: the bare cost, as before.
pub fn priced(cost: Cost, pricing: Option<&Pricing>) -> String {
    match pricing {
        Some(pricing) => format!("{cost} {pricing}"),
        None => cost.to_string(),
    }
}

/// Which columns a table shows: the ones a person compares, or `-o wide`'s
/// extra ones after them (kubectl's `-o wide`: the same rows, more columns
/// to the right, so a script cutting the first columns reads both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Columns {
    Normal,
    Wide,
}

/// One row per plan: what a buyer compares.
pub fn offers_table(offers: &[Offer]) -> Table {
    offers_table_as(offers, Columns::Normal)
}

/// [`offers_table`]; wide adds the provider's name, its Liqo generations,
/// the levels it reported, the offer's labels and version.
pub fn offers_table_as(offers: &[Offer], columns: Columns) -> Table {
    let mut header = vec!["OFFER", "PLAN", "TYPE", "PROVIDER", "COST", "RESOURCES"];
    if columns == Columns::Wide {
        header.extend([
            "PROVIDER NAME",
            "LIQO",
            "ENFORCEMENT",
            "ISOLATION",
            "LABELS",
            "VERSION",
        ]);
    }
    let mut table = Table::new(&header);
    for offer in offers {
        for (key, plan) in &offer.plans {
            let mut row = vec![
                offer.id.clone(),
                key.clone(),
                offer.offer_type.clone(),
                offer.cluster_id.clone(),
                priced(plan.cost, offer.pricing.as_ref()),
                resources(&plan.resources),
            ];
            if columns == Columns::Wide {
                row.extend([
                    offer.cluster_name.clone(),
                    or_dash(offer.liqo.iter().map(spelled).collect::<Vec<_>>().join(",")),
                    or_dash(offer.enforcement.as_ref().map(spelled).unwrap_or_default()),
                    or_dash(offer.isolation.as_ref().map(spelled).unwrap_or_default()),
                    or_dash(labels(offer)),
                    offer.version.to_string(),
                ]);
            }
            table.row(row);
        }
    }
    table
}

/// An offer's labels, `key=value` comma-separated.
fn labels(offer: &Offer) -> String {
    offer
        .labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// An offer's details, then its plans.
pub fn offer_details(offer: &Offer) -> String {
    let labels = labels(offer);
    let liqo = offer.liqo.iter().map(spelled).collect::<Vec<_>>().join(",");
    let mut text = details(&[
        ("ID", offer.id.clone()),
        ("Name", offer.name.clone()),
        ("Type", offer.offer_type.clone()),
        (
            "Provider",
            format!("{} ({})", offer.cluster_name, offer.cluster_id),
        ),
        ("Liqo", or_dash(liqo)),
        (
            "Enforcement",
            or_dash(offer.enforcement.as_ref().map(spelled).unwrap_or_default()),
        ),
        (
            "Isolation",
            or_dash(offer.isolation.as_ref().map(spelled).unwrap_or_default()),
        ),
        ("Labels", or_dash(labels)),
        ("Description", or_dash(offer.description.clone())),
        ("Version", offer.version.to_string()),
        ("Updated", offer.updated_at.to_rfc3339()),
    ]);
    let mut plans = Table::new(&["PLAN", "NAME", "COST", "RESOURCES"]);
    for (key, plan) in &offer.plans {
        plans.row(vec![
            key.clone(),
            plan.name.clone(),
            priced(plan.cost, offer.pricing.as_ref()),
            resources(&plan.resources),
        ]);
    }
    text.push('\n');
    text.push_str(&plans.render());
    text
}

pub fn reservation_table(reservation: &Reservation) -> Table {
    let mut table = Table::new(&["RESERVATION", "OFFER", "PLAN", "PROVIDER", "EXPIRES"]);
    table.row(vec![
        reservation.id.clone(),
        reservation.offer_id.clone(),
        reservation.plan_id.clone(),
        reservation.cluster_id.clone(),
        reservation.expires_at.to_rfc3339(),
    ]);
    table
}

/// `active`, or how it ended.
fn standing(contract: &Contract) -> String {
    match (contract.active, contract.ended) {
        (true, _) => "active".to_string(),
        (false, Some(ended)) => spelled(&ended),
        (false, None) => "ended".to_string(),
    }
}

pub fn contracts_table(contracts: &[Contract]) -> Table {
    contracts_table_as(contracts, Columns::Normal)
}

/// [`contracts_table`]; wide adds the consumer, its cluster, what was
/// bought, when, and where its peering stands.
pub fn contracts_table_as(contracts: &[Contract], columns: Columns) -> Table {
    let mut header = vec![
        "CONTRACT",
        "OFFER",
        "PLAN",
        "PROVIDER",
        "COST",
        "BOUGHT BY",
        "STATE",
        "STANDING",
        "EXPIRES",
        "REASON",
    ];
    if columns == Columns::Wide {
        header.extend([
            "CONSUMER",
            "CONSUMER CLUSTER",
            "RESOURCES",
            "PURCHASED",
            "PEERING",
        ]);
    }
    let mut table = Table::new(&header);
    for c in contracts {
        let mut row = vec![
            c.id.clone(),
            c.offer_id.clone(),
            c.plan_id.clone(),
            c.cluster_id.clone(),
            priced(c.cost, c.pricing.as_ref()),
            or_dash(c.bought_by.clone().unwrap_or_default()),
            c.state.as_str().to_string(),
            standing(c),
            c.expires_at.to_rfc3339(),
            c.reason.clone().unwrap_or_default(),
        ];
        if columns == Columns::Wide {
            row.extend([
                c.consumer.clone(),
                or_dash(c.consumer_cluster_id.clone().unwrap_or_default()),
                resources(&c.resources),
                c.purchased_at.to_rfc3339(),
                or_dash(peering(c)),
            ]);
        }
        table.row(row);
    }
    table
}

/// Where a contract's peering stands, `state: reason`.
fn peering(c: &Contract) -> String {
    c.peering_state
        .as_ref()
        .map(|p| format!("{}: {}", p.state.as_str(), p.reason))
        .unwrap_or_default()
}

pub fn contract_details(c: &Contract) -> String {
    let credentials = match &c.credentials {
        Some(creds) => {
            let mut kinds = Vec::new();
            if creds.v0.is_some() {
                kinds.push("v0");
            }
            if creds.v1.is_some() {
                kinds.push("v1 kubeconfig");
            }
            format!("{} (shown with -o json|yaml)", kinds.join(", "))
        }
        None => "-".to_string(),
    };
    let peering = peering(c);
    details(&[
        ("Contract", c.id.clone()),
        ("Offer", c.offer_id.clone()),
        ("Plan", c.plan_id.clone()),
        ("Provider", format!("{} ({})", c.cluster_name, c.cluster_id)),
        ("Consumer", c.consumer.clone()),
        (
            "Consumer cluster",
            or_dash(c.consumer_cluster_id.clone().unwrap_or_default()),
        ),
        ("Cost", priced(c.cost, c.pricing.as_ref())),
        (
            "Bought by",
            or_dash(c.bought_by.clone().unwrap_or_default()),
        ),
        ("Resources", resources(&c.resources)),
        ("State", c.state.as_str().to_string()),
        ("Reason", or_dash(c.reason.clone().unwrap_or_default())),
        ("Standing", standing(c)),
        ("Ending soon", c.ending_soon.to_string()),
        ("Purchased", c.purchased_at.to_rfc3339()),
        ("Expires", c.expires_at.to_rfc3339()),
        ("Peering", or_dash(peering)),
        ("Credentials", credentials),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::{assert_terminal_safe, HOSTILE};
    use catalog_client::wire::CostPeriod;
    use serde_json::json;

    fn offer() -> Offer {
        serde_json::from_value(json!({
            "id": "o1", "name": "Compute", "type": "compute", "description": "",
            "clusterID": "p1", "clusterName": "one", "liqo": ["v1"], "enforcement": "hard",
            "isolation": "unverified",
            "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z",
            "version": 3, "labels": {"region": "eu"},
            "plans": {
                "big": {"name": "big", "cost": "123456789.123456789",
                        "resources": {"cpu": "1500m", "memory": "1536Mi", "nvidia.com/gpu": "1"}},
                "small": {"name": "small", "cost": "1.10", "resources": {"cpu": "2"}}
            }
        }))
        .unwrap()
    }

    #[test]
    fn plans_are_rows_with_exact_costs_and_quantities() {
        let text = offers_table(&[offer()]).render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[1].contains("123456789.123456789"), "{text}");
        assert!(
            lines[1].ends_with("cpu=1500m,memory=1536Mi,nvidia.com/gpu=1"),
            "{text}"
        );
        assert!(
            lines[2].starts_with("o1") && lines[2].contains("small"),
            "{text}"
        );
    }

    #[test]
    fn wide_adds_columns_after_the_normal_ones() {
        let normal = offers_table(&[offer()]);
        let wide = offers_table_as(&[offer()], Columns::Wide);
        assert_eq!(wide.header[..normal.header.len()], normal.header[..]);
        assert_eq!(
            wide.header[normal.header.len()..],
            [
                "PROVIDER NAME",
                "LIQO",
                "ENFORCEMENT",
                "ISOLATION",
                "LABELS",
                "VERSION"
            ]
        );
        let text = wide.render();
        assert_eq!(cell(&text, "PROVIDER NAME", 1), "one", "{text}");
        assert_eq!(cell(&text, "ENFORCEMENT", 1), "hard", "{text}");
        assert_eq!(cell(&text, "LABELS", 2), "region=eu", "{text}");
        assert_eq!(cell(&text, "VERSION", 2), "3", "{text}");

        let c = contract(json!({"currency": "EUR", "per": "hour"}), Value::Null);
        let wide = contracts_table_as(std::slice::from_ref(&c), Columns::Wide).render();
        assert_eq!(cell(&wide, "CONSUMER", 1), "alice", "{wide}");
        assert_eq!(cell(&wide, "CONSUMER CLUSTER", 1), "-", "{wide}");
        assert_eq!(cell(&wide, "RESOURCES", 1), "cpu=2", "{wide}");
        assert_eq!(cell(&wide, "STATE", 1), "ready", "{wide}");
        let normal = contracts_table(std::slice::from_ref(&c)).render();
        assert!(!normal.contains("CONSUMER"), "{normal}");
    }

    #[test]
    fn an_offer_shows_its_provider_labels_and_plans() {
        let text = offer_details(&offer());
        assert!(text.contains("Provider:    one (p1)"), "{text}");
        assert!(text.contains("Labels:      region=eu"), "{text}");
        assert!(text.contains("Enforcement: hard"), "{text}");
        assert!(text.contains("Isolation:   unverified"), "{text}");
        assert!(text.contains("PLAN"), "{text}");
    }

    /// An offer from a hostile catalog: every string it shows carries
    /// [`HOSTILE`].
    fn hostile_offer() -> Offer {
        serde_json::from_value(json!({
            "id": HOSTILE, "name": HOSTILE, "type": HOSTILE, "description": HOSTILE,
            "clusterID": HOSTILE, "clusterName": HOSTILE, "liqo": ["v1"],
            "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z",
            "version": 1, "labels": {HOSTILE: HOSTILE},
            "plans": {HOSTILE: {"name": HOSTILE, "cost": "1", "resources": {"cpu": "1"}}}
        }))
        .unwrap()
    }

    #[test]
    fn offers_list_shows_a_hostile_offer_escaped() {
        // B-01: ids, names, types, providers, plans in the table.
        let text = offers_table(&[hostile_offer()]).render();
        assert_terminal_safe(&text);
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    #[test]
    fn offers_show_shows_a_hostile_offer_escaped() {
        // B-02, B-07: the details (the description, labels, provider) and
        // the plans table.
        let text = offer_details(&hostile_offer());
        assert_terminal_safe(&text);
        // 11 detail lines, a blank line, the plans' header and one plan.
        assert_eq!(text.lines().count(), 14, "{text}");
        // Levels the provider never reported are a dash.
        assert!(text.contains("Isolation:   -\n"), "{text}");
        assert!(text.contains("Description: a\\x1b[2J"), "{text}");
    }

    #[test]
    fn contracts_show_a_hostile_contract_escaped() {
        // B-03: the review's offerID 'o\e[31mRED\r\e[Kfake', and every
        // other string of a contract.
        let c: Contract = serde_json::from_value(json!({
            "id": HOSTILE, "consumer": HOSTILE, "clusterID": HOSTILE, "clusterName": HOSTILE,
            "offerID": "o\u{1b}[31mRED\r\u{1b}[Kfake", "planID": HOSTILE,
            "resources": {"cpu": "2"}, "cost": "1.5", "resourceSliceClass": "liqo-broker",
            "liqo": ["v1"], "purchasedAt": "2026-01-01T00:00:00Z",
            "expiresAt": "2026-02-01T00:00:00Z", "active": false, "state": "failed",
            "reason": HOSTILE, "consumerClusterID": HOSTILE,
            "stateChangedAt": "2026-01-01T00:00:00Z",
            "pricing": {"currency": HOSTILE, "per": "hour"}, "boughtBy": HOSTILE
        }))
        .unwrap();
        let table = contracts_table(std::slice::from_ref(&c)).render();
        assert_terminal_safe(&table);
        assert_eq!(table.lines().count(), 2, "{table}");
        assert!(table.contains("o\\x1b[31mRED\\r\\x1b[Kfake"), "{table}");
        assert_terminal_safe(&contract_details(&c));
    }

    /// A contract as the catalog answers it, bought by `bought_by`.
    fn contract(pricing: Value, bought_by: Value) -> Contract {
        let mut c = json!({
            "id": "c1", "consumer": "alice", "clusterID": "p1", "clusterName": "one",
            "offerID": "o1", "planID": "small", "resources": {"cpu": "2"},
            "cost": "123456789.123456789", "resourceSliceClass": "liqo-broker",
            "liqo": ["v1"], "purchasedAt": "2026-01-01T00:00:00Z",
            "expiresAt": "2026-02-01T00:00:00Z", "active": true, "state": "ready",
            "stateChangedAt": "2026-01-01T00:00:00Z"
        });
        if !pricing.is_null() {
            c["pricing"] = pricing;
        }
        if !bought_by.is_null() {
            c["boughtBy"] = bought_by;
        }
        serde_json::from_value(c).unwrap()
    }

    /// The cell of `column` in a rendered table's row `row` (1: the first
    /// data row), read at the column's offset in the header.
    fn cell<'t>(table: &'t str, column: &str, row: usize) -> &'t str {
        let lines: Vec<&str> = table.lines().collect();
        let at = lines[0]
            .find(column)
            .unwrap_or_else(|| panic!("no {column}: {table}"));
        let line = lines[row];
        let rest = line.get(at..).unwrap_or_default();
        rest.split("   ").next().unwrap_or_default().trim()
    }

    #[test]
    fn a_plan_cost_shows_its_unit_exactly() {
        // Not through a float: 123456789.123456789 as an f64 is
        // 123456789.12345679.
        let mut priced_offer = offer();
        priced_offer.pricing = Some(Pricing::new("EUR", CostPeriod::Hour).unwrap());
        let table = offers_table(std::slice::from_ref(&priced_offer)).render();
        assert_eq!(
            cell(&table, "COST", 1),
            "123456789.123456789 EUR/hour",
            "{table}"
        );
        assert_eq!(cell(&table, "COST", 2), "1.1 EUR/hour", "{table}");
        assert_eq!(
            cell(&table, "RESOURCES", 2),
            "cpu=2",
            "the columns stay apart: {table}"
        );
        priced_offer.pricing = Some(Pricing::new("USD", CostPeriod::Month).unwrap());
        let shown = offer_details(&priced_offer);
        let plans = &shown[shown.find("\nPLAN").expect("a plans table") + 1..];
        assert_eq!(
            cell(plans, "COST", 1),
            "123456789.123456789 USD/month",
            "{shown}"
        );
        assert_eq!(cell(plans, "COST", 2), "1.1 USD/month", "{shown}");
        assert_eq!(cell(plans, "RESOURCES", 2), "cpu=2", "{shown}");
    }

    #[test]
    fn an_older_catalog_without_pricing_shows_the_bare_cost() {
        let table = offers_table(&[offer()]).render();
        assert_eq!(cell(&table, "COST", 1), "123456789.123456789", "{table}");
        assert_eq!(cell(&table, "COST", 2), "1.1", "{table}");
        let c = contract(Value::Null, Value::Null);
        let table = contracts_table(std::slice::from_ref(&c)).render();
        assert_eq!(cell(&table, "COST", 1), "123456789.123456789", "{table}");
        assert!(
            contract_details(&c).contains("Cost:             123456789.123456789\n"),
            "{}",
            contract_details(&c)
        );
    }

    #[test]
    fn a_contract_shows_its_cost_with_unit_and_who_bought_it() {
        let c = contract(
            json!({"currency": "EUR", "per": "hour"}),
            json!("market-autoscaler/liqo/mas"),
        );
        let table = contracts_table(std::slice::from_ref(&c)).render();
        assert_eq!(
            cell(&table, "COST", 1),
            "123456789.123456789 EUR/hour",
            "{table}"
        );
        assert_eq!(
            cell(&table, "BOUGHT BY", 1),
            "market-autoscaler/liqo/mas",
            "{table}"
        );
        assert_eq!(cell(&table, "STATE", 1), "ready", "{table}");
        let shown = contract_details(&c);
        assert!(
            shown.contains("Cost:             123456789.123456789 EUR/hour\n"),
            "{shown}"
        );
        assert!(
            shown.contains("Bought by:        market-autoscaler/liqo/mas\n"),
            "{shown}"
        );
    }

    #[test]
    fn a_contract_a_person_bought_shows_a_dash_for_who() {
        let c = contract(json!({"currency": "EUR", "per": "month"}), Value::Null);
        let table = contracts_table(std::slice::from_ref(&c)).render();
        assert_eq!(cell(&table, "BOUGHT BY", 1), "-", "{table}");
        assert_eq!(cell(&table, "STATE", 1), "ready", "{table}");
        let shown = contract_details(&c);
        assert!(shown.contains("Bought by:        -\n"), "{shown}");
        assert!(shown.contains("EUR/month"), "{shown}");
    }

    #[test]
    fn a_hostile_bought_by_is_escaped() {
        // A buyer's free text, as a hostile catalog may serve it: it
        // retitles the window, rewrites the line and fakes a row.
        let evil = "market-autoscaler/\u{1b}]0;pwned\u{7}\r\u{1b}[2Kfake\nrow\u{202e}";
        let c = contract(json!({"currency": "EUR", "per": "hour"}), json!(evil));
        let table = contracts_table(std::slice::from_ref(&c)).render();
        assert_terminal_safe(&table);
        assert_eq!(table.lines().count(), 2, "{table}");
        let shown = "market-autoscaler/\\x1b]0;pwned\\x07\\r\\x1b[2Kfake\\nrow\\u{202e}";
        assert_eq!(cell(&table, "BOUGHT BY", 1), shown, "{table}");
        assert_eq!(cell(&table, "STATE", 1), "ready", "{table}");
        let details = contract_details(&c);
        assert_terminal_safe(&details);
        assert!(
            details.contains(&format!("Bought by:        {shown}\n")),
            "{details}"
        );
    }

    #[test]
    fn a_value_this_client_cannot_read_is_quoted_escaped() {
        // B-05: serde quotes the unknown variant as the catalog sent it.
        for level in ["enforcement", "isolation"] {
            let mut offer = serde_json::to_value(hostile_offer()).unwrap();
            offer[level] = json!(HOSTILE);
            let failure = read::<Offer>("an offer", &offer).unwrap_err();
            assert!(
                failure.message.contains("\u{1b}]52"),
                "{level}: the message quotes it raw"
            );
            let line = crate::output::error_line(&failure);
            assert_terminal_safe(&line);
            assert!(line.contains("\\x1b]52;c;"), "{level}: {line}");
        }
    }

    #[test]
    fn a_contract_names_its_credentials_without_showing_them() {
        let c: Contract = serde_json::from_value(json!({
            "id": "c1", "consumer": "alice", "clusterID": "p1", "clusterName": "one",
            "offerID": "o1", "planID": "small", "resources": {"cpu": "2"}, "cost": "1.5",
            "resourceSliceClass": "liqo-broker", "liqo": ["v0"],
            "purchasedAt": "2026-01-01T00:00:00Z", "expiresAt": "2026-02-01T00:00:00Z",
            "active": true, "state": "pending", "stateChangedAt": "2026-01-01T00:00:00Z",
            "credentials": {"v0": {"clusterID": "p1", "clusterName": "one",
                                   "authURL": "https://p", "token": "s3cret"}}
        }))
        .unwrap();
        let text = contract_details(&c);
        assert!(
            text.contains("Credentials:      v0 (shown with -o json|yaml)"),
            "{text}"
        );
        assert!(!text.contains("s3cret"), "{text}");
        let table = contracts_table(&[c]).render();
        assert!(
            table.contains("pending") && table.contains("active"),
            "{table}"
        );
    }
}
