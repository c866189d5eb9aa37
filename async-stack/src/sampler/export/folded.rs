//! Folded stacks (`flamegraph.pl`, inferno) and, with the `flamegraph`
//! feature, the SVG flamegraph inferno draws from them: the labels of the
//! text formats (see "Labels" in [`crate::sampler`]'s export).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use crate::read::native::elf::NativeSymbol;
use crate::sampler::profile::{FrameRef, Profile, Weights};

impl Profile {
    /// Writes the profile as folded stacks, the text format of
    /// `flamegraph.pl` and inferno: one line per stack, its frames root
    /// first and separated by `;`, then a space and its sample count
    /// ([`Weights::samples`]).
    ///
    /// The frames of a line are:
    ///
    /// 1. the group (task name or spawn site, see [`Grouping`](crate::sampler::Grouping));
    /// 2. the async frames, from the task root down, each as
    ///    `function at file:line:column` (`:column` left out when unknown),
    ///    so that two `.await`s of one function stay two frames;
    /// 3. for on-CPU samples, the native frames, symbolised now, each
    ///    expanded into its inlined functions, outermost first:
    ///    `function at file:line`, `function` without debug info, and
    ///    `<file name>+0x<offset>` when the module cannot be read;
    /// 4. or, instead of 2 and 3, `[cleared]`, for the stacks the memory
    ///    budget folded.
    ///
    /// So that every line parses, `;` in a name becomes `,`, control
    /// characters (newlines) become spaces, and an empty name becomes `?`.
    /// Stacks that read the same (several tasks, or on-CPU and off-CPU
    /// samples of one stack) are merged into one line, and lines are
    /// sorted, so the output is the same for the same profile:
    ///
    /// ```text
    /// api;tour::serve at src/tour.rs:12:9;tour::fetch_row at src/tour.rs:31:22 9
    /// worker;tour::crunch at src/tour.rs:60:1;tour::hash at src/hash.rs:8 7
    /// ```
    ///
    /// ```
    /// use async_stack::sampler::Sampler;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let profile = Sampler::builder().start()?.stop();
    /// let mut folded = Vec::new();
    /// profile.write_folded(&mut folded)?;
    /// for line in String::from_utf8(folded).unwrap().lines() {
    ///     let (stack, count) = line.rsplit_once(' ').unwrap();
    ///     assert!(count.parse::<u64>().is_ok() && !stack.is_empty());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of `out`.
    pub fn write_folded(&self, out: &mut impl Write) -> io::Result<()> {
        self.write_folded_by(out, |w| w.samples)
    }

    /// Writes folded stacks as [`write_folded`](Self::write_folded) does,
    /// counting each stack by `weight` of its [`Weights`] instead of its
    /// samples: for example `|w| w.wall_ns` for wall-clock time, or
    /// `|w| w.cpu_ns` for CPU time. Stacks whose count is 0 are left out.
    ///
    /// ```
    /// use async_stack::sampler::Sampler;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let profile = Sampler::builder().start()?.stop();
    /// let mut on_cpu = Vec::new();
    /// profile.write_folded_by(&mut on_cpu, |w| w.cpu_ns)?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of `out`.
    pub fn write_folded_by(
        &self,
        out: &mut impl Write,
        weight: impl Fn(&Weights) -> u64,
    ) -> io::Result<()> {
        let mut text = String::new();
        for (stack, count) in self.folded_lines(weight) {
            let _ = writeln!(text, "{stack} {count}");
        }
        out.write_all(text.as_bytes())
    }

    /// Writes the profile as an SVG flamegraph drawn by inferno, titled
    /// "async-stack profile", from the lines of
    /// [`write_folded`](Self::write_folded): groups at the bottom, each
    /// stack's width its samples.
    ///
    /// Needs the `flamegraph` feature, off by default because inferno is
    /// licensed CDDL-1.0.
    ///
    /// ```
    /// use async_stack::sampler::Sampler;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let profile = Sampler::builder().start()?.stop();
    /// let path = std::env::temp_dir().join("async-stack-doc.svg");
    /// // An empty profile has nothing to draw.
    /// if profile.totals().samples > 0 {
    ///     profile.write_svg(&mut std::fs::File::create(&path)?)?;
    /// #   std::fs::remove_file(&path)?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of `out`, and [`io::ErrorKind::InvalidData`] from inferno
    /// for a profile with no sample (nothing to draw).
    #[cfg(feature = "flamegraph")]
    pub fn write_svg(&self, out: &mut impl Write) -> io::Result<()> {
        let lines: Vec<String> = self
            .folded_lines(|w| w.samples)
            .into_iter()
            .map(|(stack, count)| format!("{stack} {count}"))
            .collect();
        let mut options = inferno::flamegraph::Options::default();
        options.title = "async-stack profile".to_owned();
        options.count_name = "samples".to_owned();
        inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
    }
}

impl Profile {
    /// The text labels of every frame of the table, by frame id, root
    /// first (a native frame has one per inlined function).
    fn frame_labels(&self) -> Vec<Vec<String>> {
        let symbols = self.symbolize_frames();
        (0..self.frames.len() as u32)
            .map(|f| match self.frame_ref(f) {
                FrameRef::Async {
                    function,
                    file,
                    line,
                    column,
                } => {
                    let (function, file) = (folded_label(function), folded_label(file));
                    vec![if column == 0 {
                        format!("{function} at {file}:{line}")
                    } else {
                        format!("{function} at {file}:{line}:{column}")
                    }]
                }
                FrameRef::Native { .. } => {
                    symbols[f as usize].iter().rev().map(symbol_label).collect()
                }
                FrameRef::Cleared => vec!["[cleared]".to_owned()],
            })
            .collect()
    }

    /// The folded lines, without their counts, merged and sorted, with
    /// their counts by `weight`; lines whose count is 0 are left out.
    fn folded_lines(&self, weight: impl Fn(&Weights) -> u64) -> BTreeMap<String, u64> {
        let labels = self.frame_labels();
        let mut lines: BTreeMap<String, u64> = BTreeMap::new();
        for e in &self.entries {
            let count = weight(&e.weights);
            if count == 0 {
                continue;
            }
            let mut line = folded_label(self.str(e.group));
            for &f in self.stack_frames(e.stack) {
                for label in &labels[f as usize] {
                    line.push(';');
                    line.push_str(label);
                }
            }
            let sum = lines.entry(line).or_default();
            *sum = sum.saturating_add(count);
        }
        lines
    }
}

/// A text-format label: `;` (the frame separator) becomes `,`, control
/// characters become spaces, and an empty label `?`.
fn folded_label(text: &str) -> String {
    let clean: String = text
        .chars()
        .map(|c| match c {
            ';' => ',',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    let clean = clean.trim();
    if clean.is_empty() {
        "?".to_owned()
    } else {
        clean.to_owned()
    }
}

/// The text label of a symbolised native frame: `function at file:line`.
fn symbol_label(s: &NativeSymbol) -> String {
    let function = folded_label(&s.function);
    match (s.file.as_deref().map(folded_label), s.line) {
        (Some(file), Some(line)) => format!("{function} at {file}:{line}"),
        (Some(file), None) => format!("{function} at {file}"),
        (None, _) => function,
    }
}
