//! A generator of synthetic Obsidian-style vaults for benchmarks: folders,
//! frontmatter (title, aliases, tags in both list styles, summary, tier,
//! updated), lead paragraphs, sections, Key Ideas, wikilinks, code blocks,
//! Sources, daily notes and some Chinese notes. Deterministic per seed.

use std::fs;
use std::io;
use std::path::Path;

/// SplitMix64: small, fast and good enough for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A Zipf-like pick: small indices are much more frequent.
    pub fn skewed(&mut self, n: usize) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((n as f64).powf(u) as usize).saturating_sub(1).min(n - 1)
    }
}

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "pra", "sto", "lin", "qua", "der", "mon",
    "tal", "ver", "shi", "gor", "ben",
];
const HAN: &str = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处理府研";

/// A vocabulary of pseudo-words shared by all notes.
pub fn vocabulary(rng: &mut Rng, size: usize) -> Vec<String> {
    let mut words = Vec::with_capacity(size);
    while words.len() < size {
        let parts = 2 + rng.below(2);
        let word: String = (0..parts)
            .map(|_| SYLLABLES[rng.below(SYLLABLES.len())])
            .collect();
        if !words.contains(&word) {
            words.push(word);
        }
    }
    words
}

fn sentence(rng: &mut Rng, vocab: &[String], words: usize) -> String {
    let mut s: Vec<&str> = (0..words)
        .map(|_| vocab[rng.skewed(vocab.len())].as_str())
        .collect();
    let first = s[0].to_string();
    let mut capital = first.clone();
    capital[..1].make_ascii_uppercase();
    s[0] = &capital;
    format!("{}.", s.join(" "))
}

fn han_sentence(rng: &mut Rng, chars: usize) -> String {
    let han: Vec<char> = HAN.chars().collect();
    let mut s: String = (0..chars).map(|_| han[rng.skewed(han.len())]).collect();
    s.push('。');
    s
}

fn paragraph(rng: &mut Rng, vocab: &[String], names: &[String], chinese: bool) -> String {
    let sentences = 3 + rng.below(5);
    let mut text = Vec::new();
    for _ in 0..sentences {
        let mut s = if chinese {
            let chars = 15 + rng.below(25);
            han_sentence(rng, chars)
        } else {
            let words = 8 + rng.below(14);
            sentence(rng, vocab, words)
        };
        if rng.below(4) == 0 {
            let target = &names[rng.below(names.len())];
            s = match rng.below(3) {
                0 => format!("{s} See [[{target}]]."),
                1 => format!("{s} Compare [[{target}|this note]]."),
                _ => format!("{s} More in [[{target}#Key Ideas]]."),
            };
        }
        text.push(s);
    }
    text.join(" ")
}

/// Writes a vault of `notes` notes under `root` (about 9 KB each on
/// average, like a mature personal wiki). Returns the bytes written.
pub fn generate(root: &Path, notes: usize, seed: u64) -> io::Result<u64> {
    let mut rng = Rng::new(seed);
    let vocab = vocabulary(&mut rng, 3000);
    let folders = [
        "concepts",
        "entities",
        "projects",
        "references",
        "synthesis",
    ];
    let names: Vec<String> = (0..notes)
        .map(|i| {
            if i % 20 == 19 {
                format!("journal/2026-{:02}-{:02}", 1 + (i / 28) % 12, 1 + i % 28)
            } else {
                format!(
                    "{}/{}-{i}",
                    folders[i % folders.len()],
                    vocab[i % vocab.len()]
                )
            }
        })
        .collect();
    let mut written = 0u64;
    let mut index = String::from("# Index\n\n");
    for (i, name) in names.iter().enumerate() {
        let chinese = i % 10 == 7;
        let title_words: Vec<&str> = (0..1 + rng.below(3))
            .map(|_| vocab[rng.skewed(vocab.len())].as_str())
            .collect();
        let title = title_words.join(" ");
        let tags: Vec<&str> = (0..1 + rng.below(4))
            .map(|_| vocab[rng.skewed(200)].as_str())
            .collect();
        let tier = ["core", "supporting", "peripheral", ""][rng.below(4)];
        let summary = if chinese {
            han_sentence(&mut rng, 30)
        } else {
            sentence(&mut rng, &vocab, 14)
        };
        let mut text = String::from("---\n");
        text.push_str(&format!("title: {title}\n"));
        if rng.below(3) == 0 {
            text.push_str(&format!("aliases: [{}]\n", vocab[rng.below(vocab.len())]));
        }
        if rng.below(2) == 0 {
            text.push_str(&format!("tags: [{}]\n", tags.join(", ")));
        } else {
            text.push_str("tags:\n");
            for tag in &tags {
                text.push_str(&format!("  - {tag}\n"));
            }
        }
        if rng.below(5) != 0 {
            text.push_str(&format!("summary: \"{summary}\"\n"));
        }
        if !tier.is_empty() {
            text.push_str(&format!("tier: {tier}\n"));
        }
        text.push_str(&format!(
            "updated: 2026-{:02}-{:02}\nsources: [source-{}]\n---\n",
            1 + rng.below(12),
            1 + rng.below(28),
            rng.below(500)
        ));
        text.push_str(&format!("# {title}\n\n"));
        text.push_str(&paragraph(&mut rng, &vocab, &names, chinese));
        text.push_str("\n\n## Key Ideas\n\n");
        for _ in 0..3 + rng.below(3) {
            let words = 6 + rng.below(8);
            text.push_str(&format!("- {}\n", sentence(&mut rng, &vocab, words)));
        }
        let sections = 3 + rng.skewed(12);
        for s in 0..sections {
            text.push_str(&format!("\n## {} {s}\n\n", vocab[rng.skewed(vocab.len())]));
            for _ in 0..1 + rng.below(3) {
                text.push_str(&paragraph(&mut rng, &vocab, &names, chinese));
                text.push_str("\n\n");
            }
            if rng.below(6) == 0 {
                text.push_str("```rust\nlet x = compute(#not_a_tag, \"[[not-a-link]]\");\n```\n\n");
            }
            if rng.below(8) == 0 {
                text.push_str(&format!("#{} ", vocab[rng.skewed(200)]));
            }
        }
        text.push_str("\n## Sources\n\n");
        for _ in 0..1 + rng.below(3) {
            text.push_str(&format!("- source-{}\n", rng.below(500)));
        }
        let path = root.join(format!("{name}.md"));
        fs::create_dir_all(path.parent().expect("note path has a folder"))?;
        fs::write(&path, &text)?;
        written += text.len() as u64;
        if i % 3 == 0 {
            index.push_str(&format!(
                "- [[{name}]] — {}\n",
                sentence(&mut rng, &vocab, 8)
            ));
        }
    }
    fs::write(root.join("index.md"), &index)?;
    let hot: String = names
        .iter()
        .rev()
        .take(5)
        .map(|n| format!("- [[{n}]]\n"))
        .collect();
    fs::write(root.join("hot.md"), format!("# Hot\n\n{hot}"))?;
    fs::write(root.join("log.md"), "# Wiki Log\n\n")?;
    Ok(written)
}
