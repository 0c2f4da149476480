//! The model run with bare `ort` and `tokenizers`, no fastembed: the
//! reference our path is compared with (in the tests) and measured against
//! (in the bench).

use loopguard_semantic::{ModelFiles, ort_environment};
use ndarray::{Array2, Axis};
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::Tensor;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// A session and a tokenizer, set up like fastembed sets them up.
pub(crate) struct Bare {
    session: Session,
    tokenizer: Tokenizer,
    token_type_ids: bool,
}

impl Bare {
    /// Loads `model.onnx` and `tokenizer.json` from verified files.
    pub(crate) fn new(files: &ModelFiles, threads: usize) -> Result<Self, String> {
        let environment = ort_environment(files).map_err(|e| e.to_string())?;
        let session = Session::builder(&environment)
            .map_err(|e| e.to_string())?
            .with_optimization_level(GraphOptimizationLevel::Level3)
            .map_err(|e| e.to_string())?
            .with_intra_threads(threads)
            .map_err(|e| e.to_string())?
            .commit_from_file(files.model())
            .map_err(|e| e.to_string())?;
        let mut tokenizer = Tokenizer::from_file(files.tokenizer()).map_err(|e| e.to_string())?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            pad_token: "[PAD]".into(),
            pad_id: 0,
            ..Default::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: 256,
                ..Default::default()
            }))
            .map_err(|e| e.to_string())?;
        let token_type_ids = session
            .inputs()
            .iter()
            .any(|i| i.name() == "token_type_ids");
        Ok(Self {
            session,
            tokenizer,
            token_type_ids,
        })
    }

    /// Tokenizes, runs the session, mean-pools over the attention mask and
    /// L2-normalizes.
    pub(crate) fn embed(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| e.to_string())?;
        let rows = encodings.len();
        let cols = encodings.first().map_or(0, |e| e.len());
        let collect = |f: &dyn Fn(&tokenizers::Encoding) -> &[u32]| -> Result<Array2<i64>, String> {
            let data: Vec<i64> = encodings
                .iter()
                .flat_map(|e| f(e).iter().map(|&x| i64::from(x)))
                .collect();
            Array2::from_shape_vec((rows, cols), data).map_err(|e| e.to_string())
        };
        let ids = collect(&|e| e.get_ids())?;
        let mask = collect(&|e| e.get_attention_mask())?;
        let types = collect(&|e| e.get_type_ids())?;

        let mut inputs = ort::inputs![
            "input_ids" => Tensor::from_array(ids).map_err(|e| e.to_string())?,
            "attention_mask" => Tensor::from_array(mask.clone()).map_err(|e| e.to_string())?,
        ];
        if self.token_type_ids {
            inputs.push((
                "token_type_ids".into(),
                Tensor::from_array(types).map_err(|e| e.to_string())?.into(),
            ));
        }
        let outputs = self.session.run(inputs).map_err(|e| e.to_string())?;
        let hidden = outputs[0]
            .try_extract_array::<f32>()
            .map_err(|e| e.to_string())?;
        let mut out = Vec::with_capacity(rows);
        for (b, tokens) in hidden.axis_iter(Axis(0)).enumerate() {
            let dim = tokens.shape().last().copied().unwrap_or(0);
            let mut sum = vec![0f32; dim];
            let mut count = 0f32;
            for (t, token) in tokens.axis_iter(Axis(0)).enumerate() {
                if mask[[b, t]] == 0 {
                    continue;
                }
                count += 1.0;
                for (s, x) in sum.iter_mut().zip(token.iter()) {
                    *s += x;
                }
            }
            let count = count.max(1.0);
            sum.iter_mut().for_each(|s| *s /= count);
            loopguard_semantic::normalize(&mut sum);
            out.push(sum);
        }
        Ok(out)
    }
}
