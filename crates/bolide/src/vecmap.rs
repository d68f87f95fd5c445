//! A map kept as a list: for the few entries a session holds (its subscriptions), where a hash
//! map's table (four buckets at least, 300 bytes for one subscription) costs more than a scan.

use std::borrow::Borrow;

/// Keys in insertion order, each once; lookups scan.
#[derive(Debug, Clone)]
pub struct VecMap<K, V>(Vec<(K, V)>);

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        VecMap(Vec::new())
    }
}

impl<K: Eq, V> VecMap<K, V> {
    pub fn new() -> Self {
        Self::default()
    }

    fn position<Q: Eq + ?Sized>(&self, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
    {
        self.0.iter().position(|(k, _)| k.borrow() == key)
    }

    /// Sets `key` to `value`; the value it had, if any.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.position(&key) {
            Some(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            None => {
                // One at a time: a session's handful of entries, no spare room.
                self.0.reserve_exact(1);
                self.0.push((key, value));
                None
            }
        }
    }

    pub fn get<Q: Eq + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.position(key).map(|i| &self.0[i].1)
    }

    pub fn get_mut<Q: Eq + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.position(key).map(|i| &mut self.0[i].1)
    }

    pub fn remove<Q: Eq + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.position(key).map(|i| self.0.remove(i).1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn clear(&mut self) {
        self.0 = Vec::new();
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::VecMap;

    #[test]
    fn a_key_is_kept_once_and_found_by_its_borrowed_form() {
        let mut m = VecMap::new();
        assert_eq!(m.insert("a".to_string(), 1), None);
        assert_eq!(m.insert("b".to_string(), 2), None);
        assert_eq!(m.insert("a".to_string(), 3), Some(1));
        assert_eq!(m.len(), 2);
        assert_eq!(m.get("a"), Some(&3));
        *m.get_mut("b").unwrap() += 10;
        assert_eq!(m.values().copied().collect::<Vec<_>>(), [3, 12]);
        assert_eq!(m.remove("a"), Some(3));
        assert_eq!(m.remove("a"), None);
        assert_eq!(m.iter().map(|(k, v)| (k.as_str(), *v)).collect::<Vec<_>>(), [("b", 12)]);
        m.clear();
        assert!(m.is_empty());
    }
}
