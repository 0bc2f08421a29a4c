//! A tool's JSON schema as the TypeScript-like type openai-harmony writes into the developer
//! message (`HarmonyEncoding::json_schema_to_typescript`, openai-harmony 0.0.8), quirks
//! included: gpt-oss was trained on this text, and token identity with openai-harmony is the
//! contract (`tests/fixtures/harmony`). Object properties keep the request's order (serde_json's
//! `preserve_order`, which openai-harmony enables too).

use serde_json::Value;

/// The type of `schema`, its nested lines indented by `indent`.
pub fn schema_type(schema: &Value, indent: &str) -> String {
    if let Some(variants) = schema.get("oneOf").and_then(Value::as_array) {
        return top_level_one_of(variants, indent);
    }
    if let Some(types) = schema.get("type").and_then(Value::as_array) {
        let names: Vec<&str> = types
            .iter()
            .filter_map(Value::as_str)
            .map(|t| if t == "integer" { "number" } else { t })
            .collect();
        if !names.is_empty() {
            return names.join(" | ");
        }
    }
    let Some(kind) = schema.get("type").and_then(Value::as_str) else {
        return "any".to_string();
    };
    match kind {
        "object" => object(schema, indent),
        "string" => {
            let values: Vec<String> = enum_values(schema)
                .iter()
                .filter_map(Value::as_str)
                .map(|s| format!("\"{s}\""))
                .collect();
            if values.is_empty() {
                "string".to_string()
            } else {
                values.join(" | ")
            }
        }
        "number" | "integer" => "number".to_string(),
        "boolean" => "boolean".to_string(),
        "array" => match schema.get("items") {
            Some(items) => format!("{}[]", schema_type(items, indent)),
            None => "Array<any>".to_string(),
        },
        _ => "any".to_string(),
    }
}

fn enum_values(schema: &Value) -> &[Value] {
    schema
        .get("enum")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn is_enum(schema: &Value) -> bool {
    !enum_values(schema).is_empty()
}

fn str_field<'a>(schema: &'a Value, key: &str) -> Option<&'a str> {
    schema.get(key).and_then(Value::as_str)
}

/// A default's comment text. openai-harmony quotes a string default unless the schema is an
/// enum, where it writes the string bare, or (`json_for_enum`, in a top-level `oneOf`) as JSON.
fn default_text(default: &Value, schema: &Value, json_for_enum: bool) -> String {
    match default.as_str() {
        Some(s) if !is_enum(schema) => format!("default: \"{s}\""),
        Some(s) if !json_for_enum => format!("default: {s}"),
        _ => format!("default: {default}"),
    }
}

/// `T | null` for a `nullable` variant whose type does not say null already.
fn with_nullable(schema: &Value, mut text: String) -> String {
    if schema.get("nullable").and_then(Value::as_bool) == Some(true) && !text.contains("null") {
        text.push_str(" | null");
    }
    text
}

fn top_level_one_of(variants: &[Value], indent: &str) -> String {
    let mut out = String::new();
    for variant in variants {
        out.push_str(&format!("\n{indent} | "));
        let text = schema_type(variant, &format!("{indent}   "));
        out.push_str(&with_nullable(variant, text));
        let mut comments = Vec::new();
        if let Some(d) = str_field(variant, "description") {
            comments.push(d.to_string());
        }
        if let Some(default) = variant.get("default") {
            comments.push(default_text(default, variant, true));
        }
        if !comments.is_empty() {
            out.push_str(&format!(" // {}", comments.join(" ")));
        }
    }
    out
}

fn object(schema: &Value, indent: &str) -> String {
    let mut out = String::new();
    if let Some(d) = str_field(schema, "description") {
        out.push_str(&format!("{indent}// {d}\n"));
    }
    out.push_str("{\n");
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (key, val) in props {
            let optional = if required.contains(&key.as_str()) {
                ""
            } else {
                "?"
            };
            if let Some(title) = str_field(val, "title") {
                out.push_str(&format!("{indent}// {title}\n{indent}//\n"));
            }
            let one_of = val.get("oneOf");
            if one_of.is_none() {
                if let Some(d) = str_field(val, "description") {
                    out.push_str(&format!("{indent}// {d}\n"));
                }
            }
            if let Some(examples) = val.get("examples").and_then(Value::as_array) {
                if !examples.is_empty() {
                    out.push_str(&format!("{indent}// Examples:\n"));
                    for example in examples.iter().filter_map(Value::as_str) {
                        out.push_str(&format!("{indent}// - \"{example}\"\n"));
                    }
                }
            }
            if let Some(variants) = one_of.and_then(Value::as_array) {
                property_one_of(&mut out, val, variants, key, optional, indent);
                continue;
            }
            out.push_str(&format!("{indent}{key}{optional}: "));
            let text = schema_type(val, &format!("{indent}    "));
            out.push_str(&with_nullable(val, text));
            out.push(',');
            if let Some(default) = val.get("default") {
                out.push_str(&format!(" // {}", default_text(default, val, false)));
            }
            out.push('\n');
        }
    }
    out.push_str(&format!("{indent}}}"));
    out
}

/// A property whose schema is a `oneOf`: its comments above, then a line per variant.
fn property_one_of(
    out: &mut String,
    val: &Value,
    variants: &[Value],
    key: &str,
    optional: &str,
    indent: &str,
) {
    let property_desc = str_field(val, "description");
    // The property's description is left out where the first variant repeats it.
    let skip = property_desc.is_some()
        && variants
            .first()
            .and_then(|v| str_field(v, "description"))
            .is_some_and(|d| Some(d) == property_desc);
    let desc_above = !skip && property_desc.is_some();
    if let (false, Some(d)) = (skip, property_desc) {
        out.push_str(&format!("{indent}// {d}\n"));
    }
    if let Some(default) = val.get("default") {
        out.push_str(&format!(
            "{indent}// {}\n",
            default_text(default, val, false)
        ));
    }
    out.push_str(&format!("{indent}{key}{optional}:\n"));
    for (i, variant) in variants.iter().enumerate() {
        out.push_str(&format!("{indent} | "));
        let text = schema_type(variant, &format!("{indent}   "));
        out.push_str(&with_nullable(variant, text));
        let mut comments = Vec::new();
        if !(i == 0 && desc_above) {
            if let Some(d) = str_field(variant, "description").filter(|d| Some(*d) != property_desc)
            {
                comments.push(d.to_string());
            }
        }
        if let Some(default) = variant.get("default") {
            comments.push(default_text(default, variant, false));
        }
        if !comments.is_empty() {
            out.push_str(&format!(" // {}", comments.join(" ")));
        }
        out.push('\n');
    }
    out.push_str(&format!("{indent},\n"));
}
