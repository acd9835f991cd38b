//! The tokenizer a run needs and the rules it cuts windows and decodes with: BERT's
//! vocabulary (run_squad's rules), or a fast tokenizer's tokenizer.json (run_qa's rules,
//! the default for one that is not WordPiece).

use std::path::{Path, PathBuf};

use crate::decode::Postprocess;
use crate::error::{Error, Location, Result};
use crate::tokenize::{BertTokenizer, PretrainedTokenizer, Tokenizer};

/// A tokenizer as loaded, with the rules in force.
#[derive(Debug)]
pub struct LoadedTokenizer {
    /// BERT's tokenizer or a fast one.
    pub tokenizer: Tokenizer,
    /// The rules windows are cut and answers decoded by.
    pub postprocess: Postprocess,
    /// The file read (the vocabulary or the tokenizer.json), for a run's fingerprint.
    pub file: PathBuf,
}

impl LoadedTokenizer {
    /// The casing the run decodes with: BERT's tokenizer's own (`lower_case` as given
    /// unless its vocabulary says otherwise); a fast tokenizer's normalizer decides its
    /// own, and `lower_case` is kept as given.
    pub fn lower_case(&self, lower_case: bool) -> bool {
        match &self.tokenizer {
            Tokenizer::Bert(t) => crate::types::TokenText::lower_case(&**t),
            Tokenizer::Pretrained(_) => lower_case,
        }
    }

    /// A warning that the casing looks wrong for the vocabulary (BERT's tokenizer only).
    pub fn casing_warning(&self) -> Option<&str> {
        match &self.tokenizer {
            Tokenizer::Bert(t) => t.casing_warning(),
            Tokenizer::Pretrained(_) => None,
        }
    }
}

/// Loads the tokenizer: `tokenizer` (a tokenizer.json or the folder `save_pretrained`
/// writes) when given, else BERT's vocabulary `vocab`; with `rules`, or the default
/// rules of the tokenizer (run_qa's for a fast tokenizer that is not WordPiece,
/// NVIDIA's run_squad otherwise). run_qa's rules need a fast tokenizer; run_squad's need
/// WordPiece.
pub fn load_tokenizer(
    vocab: &Path,
    tokenizer: Option<&Path>,
    lower_case: bool,
    rules: Option<Postprocess>,
) -> Result<LoadedTokenizer> {
    let Some(path) = tokenizer else {
        if rules == Some(Postprocess::RunQa) {
            return Err(Error::Config(
                "run_qa's rules cut windows with a fast tokenizer: give its tokenizer.json or \
                 its folder with `tokenizer`"
                    .into(),
            ));
        }
        return Ok(LoadedTokenizer {
            tokenizer: Tokenizer::Bert(Box::new(BertTokenizer::from_vocab_file(
                vocab, lower_case,
            )?)),
            postprocess: rules.unwrap_or(Postprocess::Nvidia),
            file: vocab.to_path_buf(),
        });
    };
    let (file, kind) = PretrainedTokenizer::model_kind(path)?;
    let postprocess = match rules {
        Some(r) => r,
        None if kind == "WordPiece" => Postprocess::Nvidia,
        None => Postprocess::RunQa,
    };
    if postprocess == Postprocess::RunQa {
        return Ok(LoadedTokenizer {
            tokenizer: Tokenizer::Pretrained(Box::new(PretrainedTokenizer::from_path(path)?)),
            postprocess,
            file,
        });
    }
    if kind != "WordPiece" {
        return Err(Error::input(
            Location::file(&file),
            format!(
                "`postprocess = {}` cuts run_squad's windows with BERT's WordPiece, but this \
                 is a {kind} tokenizer: use `postprocess = run-qa` (the default for it)",
                postprocess.as_str(),
            ),
        ));
    }
    Ok(LoadedTokenizer {
        tokenizer: Tokenizer::Bert(Box::new(BertTokenizer::from_tokenizer_json(
            &file, lower_case,
        )?)),
        postprocess,
        file,
    })
}
