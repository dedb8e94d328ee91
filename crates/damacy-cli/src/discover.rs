//! Finding the arrays in a store, and their stored sizes: what `damacy inspect` shows of a
//! store, through the store's zarrs storage handle.

use damacy::Store;
use damacy::zarrs_storage::{ListableStorageTraits, ReadableStorageTraits, StoreKey, StorePrefix};

type Result<T> = std::result::Result<T, String>;

/// The paths (`/a/b`) of every zarr array (v2 or v3) in the store, sorted.
pub(crate) fn list_arrays(store: &Store) -> Result<Vec<String>> {
    let keys = store
        .storage()
        .list()
        .map_err(|e| format!("cannot list store {}: {e}; name the array to inspect instead", store.url()))?;
    let mut arrays = Vec::new();
    for key in keys {
        let k = key.as_str();
        let (parent, is_v3) = if let Some(p) = k.strip_suffix("zarr.json") {
            (p, true)
        } else if let Some(p) = k.strip_suffix(".zarray") {
            (p, false)
        } else {
            continue;
        };
        if !(parent.is_empty() || parent.ends_with('/')) {
            continue;
        }
        if is_v3 && !is_v3_array(store, &key)? {
            continue;
        }
        arrays.push(format!("/{}", parent.trim_end_matches('/')));
    }
    arrays.sort();
    arrays.dedup();
    Ok(arrays)
}

fn is_v3_array(store: &Store, key: &StoreKey) -> Result<bool> {
    let Some(bytes) = store.storage().get(key).map_err(|e| format!("cannot read {key}: {e}"))? else {
        return Ok(false);
    };
    let json: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("invalid metadata {key}: not JSON: {e}"))?;
    Ok(json.get("node_type").and_then(|v| v.as_str()) == Some("array"))
}

/// Bytes stored under an array's prefix, metadata excluded; `None` when the store cannot
/// list.
#[must_use]
pub(crate) fn stored_bytes(store: &Store, array_path: &str) -> Option<u64> {
    let trimmed = array_path.trim_matches('/');
    let prefix = if trimmed.is_empty() { StorePrefix::root() } else { StorePrefix::new(format!("{trimmed}/")).ok()? };
    let keys = store.storage().list_prefix(&prefix).ok()?;
    let mut total = 0;
    for key in keys {
        let name = key.as_str().rsplit('/').next().unwrap_or("");
        if matches!(name, "zarr.json" | ".zarray" | ".zattrs" | ".zgroup") {
            continue;
        }
        // Nested arrays are not part of this array's chunks.
        let rest = &key.as_str()[prefix.as_str().len()..];
        if rest.contains("zarr.json") {
            continue;
        }
        total += store.storage().size_key(&key).ok().flatten()?;
    }
    Some(total)
}

/// Whether the store's root is itself an array (the URL points at an array, not at a group or
/// a folder of arrays): a v3 `zarr.json` whose node type is `array`, or a v2 `.zarray`.
pub(crate) fn root_is_array(store: &Store) -> Result<bool> {
    let v3 = StoreKey::new("zarr.json").map_err(|e| e.to_string())?;
    if is_v3_array(store, &v3)? {
        return Ok(true);
    }
    let v2 = StoreKey::new(".zarray").map_err(|e| e.to_string())?;
    Ok(store.storage().size_key(&v2).map_err(|e| format!("cannot read .zarray: {e}"))?.is_some())
}
