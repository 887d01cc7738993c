//! The KV cache as a pool of fixed-size blocks.

use crate::config::BLOCK_SIZE;

#[derive(Debug)]
pub(crate) struct KvPool {
    total_blocks: u32,
    free_blocks: u32,
}

impl KvPool {
    pub fn with_capacity_tokens(tokens: u32) -> Self {
        let total_blocks = tokens / BLOCK_SIZE;
        Self { total_blocks, free_blocks: total_blocks }
    }

    /// Blocks needed to hold `tokens` tokens of context.
    pub fn blocks_for(tokens: u32) -> u32 {
        tokens.div_ceil(BLOCK_SIZE)
    }

    /// Takes `blocks` if that many are free; takes nothing otherwise.
    pub fn try_take(&mut self, blocks: u32) -> bool {
        let enough = self.free_blocks >= blocks;
        if enough {
            self.free_blocks -= blocks;
        }
        enough
    }

    pub fn give_back(&mut self, blocks: u32) {
        self.free_blocks += blocks;
        debug_assert!(self.free_blocks <= self.total_blocks, "more blocks returned than taken");
    }

    /// Fraction of blocks in use, 0–1 (vLLM's `kv_cache_usage_perc`).
    pub fn usage(&self) -> f64 {
        f64::from(self.total_blocks - self.free_blocks) / f64::from(self.total_blocks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_is_all_or_nothing_in_whole_blocks() {
        // 100 tokens make six whole blocks.
        let mut pool = KvPool::with_capacity_tokens(100);
        assert_eq!(KvPool::blocks_for(17), 2);
        assert!(pool.try_take(4));
        assert!(!pool.try_take(3));
        assert!((pool.usage() - 4.0 / 6.0).abs() < 1e-9);
        assert!(pool.try_take(2));
        assert_eq!(pool.usage(), 1.0);
        pool.give_back(6);
        assert_eq!(pool.usage(), 0.0);
    }
}
