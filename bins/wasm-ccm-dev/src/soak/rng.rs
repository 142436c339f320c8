//! The soak's only source of randomness: SplitMix64 (in the kit, since each cloud's fault model
//! draws from it too), seeded from `--seed`, so a schedule is a function of the seed alone; and
//! the deck that deals the fault kinds.

pub(crate) use wasm_ccm_sim::kit::soak::SplitMix64;

/// Draws every kind once per round, in a fresh random order each round: a short soak still
/// exercises every kind, and a long one exercises them evenly.
#[derive(Debug, Clone)]
pub(super) struct Deck<T: Copy> {
    all: Vec<T>,
    pending: Vec<T>,
}

impl<T: Copy> Deck<T> {
    /// A deck of `all` (each entry is one card; repeat an entry to make it more frequent).
    pub(super) fn new(all: &[T]) -> Self {
        Deck {
            all: all.to_vec(),
            pending: Vec::new(),
        }
    }

    /// The next card, reshuffling when the round is over; None for an empty deck.
    pub(super) fn draw(&mut self, rng: &mut SplitMix64) -> Option<T> {
        if self.pending.is_empty() {
            self.pending = self.all.clone();
            rng.shuffle(&mut self.pending);
        }
        self.pending.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deck_deals_every_card_each_round() {
        let mut r = SplitMix64::new(7);
        let mut deck = Deck::new(&[1, 2, 3, 4]);
        let mut round: Vec<i32> = (0..4).filter_map(|_| deck.draw(&mut r)).collect();
        round.sort();
        assert_eq!(round, [1, 2, 3, 4]);
    }
}
