//! Where this process sits in the job: rank, world size, local rank.

use crate::error::SamplerError;

/// This process's rank and the world size, given explicitly or read from the
/// environment that torchrun sets (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`).
///
/// ```
/// use damacy_sampler::RankSource;
/// let r = RankSource::new(1, 4);
/// assert_eq!((r.rank(), r.world()), (1, 4));
///
/// // Reading the environment through a lookup function, as `from_env` does:
/// let env = |name: &str| match name {
///     "RANK" => Some("3".to_string()),
///     "WORLD_SIZE" => Some("8".to_string()),
///     "LOCAL_RANK" => Some("1".to_string()),
///     _ => None,
/// };
/// let r = RankSource::from_lookup(env)?;
/// assert_eq!((r.rank(), r.world(), r.local_rank()), (3, 8, Some(1)));
/// # Ok::<(), damacy_sampler::SamplerError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RankSource {
    rank: u32,
    world: u32,
    local_rank: Option<u32>,
}

impl Default for RankSource {
    /// A single process: rank 0 of 1.
    fn default() -> Self {
        Self::new(0, 1)
    }
}

impl RankSource {
    /// An explicit rank and world size. Checked by [`Plan::new`](crate::Plan::new)
    /// (world ≥ 1, rank < world).
    #[must_use]
    pub fn new(rank: u32, world: u32) -> Self {
        Self { rank, world, local_rank: None }
    }

    /// Reads `RANK`, `WORLD_SIZE` and `LOCAL_RANK` from the process environment.
    ///
    /// With neither `RANK` nor `WORLD_SIZE` set, this is a single process
    /// (rank 0 of 1). One set without the other, a value that is not a
    /// non-negative integer, a world size of 0 or a rank ≥ the world size is an
    /// error naming the variable.
    pub fn from_env() -> Result<Self, SamplerError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// As [`from_env`](Self::from_env), reading variables through `lookup`
    /// (testable without touching the process environment).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, SamplerError> {
        let parse = |name: &'static str| -> Result<Option<u32>, SamplerError> {
            match lookup(name) {
                None => Ok(None),
                Some(value) => {
                    value.trim().parse::<u32>().map(Some).map_err(|_| SamplerError::InvalidEnv { name, value })
                }
            }
        };
        let rank = parse("RANK")?;
        let world = parse("WORLD_SIZE")?;
        let local_rank = parse("LOCAL_RANK")?;
        let (rank, world) = match (rank, world) {
            (None, None) => (0, 1),
            (Some(r), Some(w)) => (r, w),
            (Some(_), None) => {
                return Err(SamplerError::IncompleteEnv { present: "RANK", missing: "WORLD_SIZE" });
            }
            (None, Some(_)) => {
                return Err(SamplerError::IncompleteEnv { present: "WORLD_SIZE", missing: "RANK" });
            }
        };
        let source = Self { rank, world, local_rank };
        source.validate()?;
        Ok(source)
    }

    /// Sets the local rank (the GPU index on this node).
    #[must_use]
    pub fn with_local_rank(mut self, local_rank: u32) -> Self {
        self.local_rank = Some(local_rank);
        self
    }

    /// This process's rank, in `0..world`.
    #[must_use]
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The number of ranks.
    #[must_use]
    pub fn world(&self) -> u32 {
        self.world
    }

    /// The rank on this node, when known.
    #[must_use]
    pub fn local_rank(&self) -> Option<u32> {
        self.local_rank
    }

    /// Checks world ≥ 1 and rank < world.
    pub fn validate(&self) -> Result<(), SamplerError> {
        if self.world == 0 {
            return Err(SamplerError::ZeroWorld);
        }
        if self.rank >= self.world {
            return Err(SamplerError::RankOutOfRange { rank: self.rank, world: self.world });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_string())
    }

    #[test]
    fn reads_torchrun_variables() {
        let r = RankSource::from_lookup(env(&[("RANK", "5"), ("WORLD_SIZE", "16"), ("LOCAL_RANK", "1")])).unwrap();
        assert_eq!((r.rank(), r.world(), r.local_rank()), (5, 16, Some(1)));
    }

    #[test]
    fn no_variables_means_single_process() {
        let r = RankSource::from_lookup(env(&[])).unwrap();
        assert_eq!((r.rank(), r.world(), r.local_rank()), (0, 1, None));
    }

    #[test]
    fn bad_values_are_named() {
        let e = RankSource::from_lookup(env(&[("RANK", "x"), ("WORLD_SIZE", "2")])).unwrap_err();
        assert_eq!(e, SamplerError::InvalidEnv { name: "RANK", value: "x".into() });
        assert!(e.to_string().contains("RANK=\"x\""), "{e}");
        let e = RankSource::from_lookup(env(&[("RANK", "-1"), ("WORLD_SIZE", "2")])).unwrap_err();
        assert!(matches!(e, SamplerError::InvalidEnv { name: "RANK", .. }));
        let e = RankSource::from_lookup(env(&[("RANK", "2"), ("WORLD_SIZE", "2")])).unwrap_err();
        assert_eq!(e, SamplerError::RankOutOfRange { rank: 2, world: 2 });
        let e = RankSource::from_lookup(env(&[("RANK", "0"), ("WORLD_SIZE", "0")])).unwrap_err();
        assert_eq!(e, SamplerError::ZeroWorld);
        let e = RankSource::from_lookup(env(&[("RANK", "0")])).unwrap_err();
        assert!(e.to_string().contains("RANK is set but WORLD_SIZE is not"), "{e}");
        let e = RankSource::from_lookup(env(&[("WORLD_SIZE", "4"), ("LOCAL_RANK", "z")])).unwrap_err();
        assert!(matches!(e, SamplerError::InvalidEnv { name: "LOCAL_RANK", .. }));
    }

    #[test]
    fn whitespace_is_tolerated() {
        let r = RankSource::from_lookup(env(&[("RANK", " 1\n"), ("WORLD_SIZE", "2 ")])).unwrap();
        assert_eq!((r.rank(), r.world()), (1, 2));
    }
}
