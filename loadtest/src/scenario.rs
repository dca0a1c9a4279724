//! Scenario files: which requests to send, in what proportions.
//!
//! A scenario is TOML: a name, a default workflow, and `[[requests]]`, each a kind of request
//! with a weight (its share of the traffic) and what it carries. Paths in it are relative to
//! the scenario file. Every request is rendered once, before the run, into the exact bytes
//! sent ([`crate::prepare`]), so the generator only writes buffers.
//!
//! ```toml
//! name = "default-text"
//! workflow = "default"
//!
//! [[requests]]
//! name = "text-short"
//! kind = "text"
//! weight = 50
//! text = "Thanks, the parcel arrived on time."
//!
//! [[requests]]
//! name = "jpeg-12mp"
//! kind = "image"
//! weight = 5
//! synthetic = { width = 4000, height = 3000 }
//! ```

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;

/// Requests per scenario at most (each is rendered and kept in memory).
pub const REQUESTS_MAX: usize = 256;
/// The largest file a request may carry (modgate's own image limit).
pub const FILE_BYTES_MAX: usize = 15_000_000;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The workflow of requests that name none.
    #[serde(default = "default_workflow")]
    pub workflow: String,
    pub requests: Vec<RequestSpec>,
    /// The directory paths are relative to (the scenario file's).
    #[serde(skip)]
    pub base: PathBuf,
}

fn default_workflow() -> String {
    "default".to_owned()
}

/// The routes and refusals a scenario can mix.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `POST /v1/text`, a TextRequest.
    Text,
    /// `POST /v1/image`, the raw image.
    Image,
    /// `POST /v1/image?url=`, from the tool's own image server.
    Url,
    /// `POST /1.0/text/check-workflow.json`, multipart.
    CompatText,
    /// `POST /1.0/check-workflow.json` with `media`, multipart.
    CompatImage,
    /// `GET /1.0/check-workflow.json?url=`, from the tool's own image server.
    CompatUrl,
    /// A check with a well-formed key that does not exist: 401. On the route of `on`.
    BadKey,
    /// A check whose body is cut short: 400 (JSON cut, an image cut in half, a form without
    /// its closing boundary). On the route of `on`.
    Malformed,
    /// `GET /health`.
    Health,
}

impl Kind {
    /// The status a well-behaved server answers with.
    pub fn expected_status(self) -> u16 {
        match self {
            Kind::BadKey => 401,
            Kind::Malformed => 400,
            _ => 200,
        }
    }

    /// Whether a bad key or a malformed body can be sent this way.
    fn takes_bad_requests(self) -> bool {
        matches!(
            self,
            Kind::Text | Kind::Image | Kind::CompatText | Kind::CompatImage
        )
    }
}

impl RequestSpec {
    /// The route a request goes to, as the kind it imitates: a bad key or a malformed body
    /// is sent the way `on` sends its requests (a text check by default).
    pub fn shape(&self) -> Kind {
        match self.kind {
            Kind::BadKey | Kind::Malformed => self.on.unwrap_or(Kind::Text),
            kind => kind,
        }
    }

    pub fn needs_image(&self) -> bool {
        matches!(
            self.shape(),
            Kind::Image | Kind::Url | Kind::CompatImage | Kind::CompatUrl
        )
    }

    pub fn needs_text(&self) -> bool {
        matches!(self.shape(), Kind::Text | Kind::CompatText)
    }
}

/// The content type of an image file, by its extension.
pub fn content_type_of(path: &Path) -> &'static str {
    let extension = path.extension().and_then(|e| e.to_str());
    match extension.map(str::to_ascii_lowercase).as_deref() {
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("png") => "image/png",
        Some("webp") => "image/webp",
        Some("gif") => "image/gif",
        _ => "application/octet-stream",
    }
}

/// A JPEG made at start from a committed test photo, upscaled: large images without
/// megabytes in the repository.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Synthetic {
    pub width: u32,
    pub height: u32,
    #[serde(default = "default_quality")]
    pub quality: u8,
}

fn default_quality() -> u8 {
    85
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestSpec {
    pub name: String,
    pub kind: Kind,
    pub weight: u32,
    #[serde(default)]
    pub workflow: Option<String>,
    /// The text, inline.
    #[serde(default)]
    pub text: Option<String>,
    /// Or a file holding it.
    #[serde(default)]
    pub text_file: Option<PathBuf>,
    /// An image file.
    #[serde(default)]
    pub image: Option<PathBuf>,
    /// Or a synthetic JPEG.
    #[serde(default)]
    pub synthetic: Option<Synthetic>,
    /// For `bad_key` and `malformed`: which kind of request goes wrong (`text`, `image`,
    /// `compat_text` or `compat_image`; `text` when absent).
    #[serde(default)]
    pub on: Option<Kind>,
    /// Every request sent carries content the server has not seen: a stamp of words written
    /// into the text, or into a JPEG's comment segment ([`crate::prepare::stamp`]). Without
    /// it the same bytes go again and again, and a server that keeps results for repeats
    /// (modgate's defaults) answers them without running its models. Texts and JPEG images
    /// (`text`, `compat_text`, `image`, `compat_image`).
    #[serde(default)]
    pub fresh: bool,
}

impl Scenario {
    pub fn load(path: &Path) -> anyhow::Result<Scenario> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the scenario {}", path.display()))?;
        let mut scenario: Scenario =
            toml::from_str(&text).with_context(|| format!("scenario {}", path.display()))?;
        scenario.base = path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        scenario.validate()?;
        Ok(scenario)
    }

    /// Parses a scenario given as text, its paths relative to `base`.
    pub fn parse(text: &str, base: &Path) -> anyhow::Result<Scenario> {
        let mut scenario: Scenario = toml::from_str(text).context("scenario")?;
        scenario.base = base.to_path_buf();
        scenario.validate()?;
        Ok(scenario)
    }

    fn validate(&self) -> anyhow::Result<()> {
        if self.requests.is_empty() || self.requests.len() > REQUESTS_MAX {
            bail!("a scenario has 1 to {REQUESTS_MAX} requests");
        }
        if self.requests.iter().all(|r| r.weight == 0) {
            bail!("every weight is 0");
        }
        for request in &self.requests {
            let name = &request.name;
            let texts =
                usize::from(request.text.is_some()) + usize::from(request.text_file.is_some());
            let images =
                usize::from(request.image.is_some()) + usize::from(request.synthetic.is_some());
            match (request.kind, request.on) {
                (Kind::BadKey | Kind::Malformed, Some(on)) if !on.takes_bad_requests() => {
                    bail!("request '{name}': `on` is text, image, compat_text or compat_image");
                }
                (Kind::BadKey | Kind::Malformed, _) | (_, None) => {}
                (_, Some(_)) => bail!("request '{name}': `on` is for bad_key and malformed"),
            }
            if request.needs_text() && texts != 1 {
                bail!("request '{name}': give `text` or `text_file`");
            }
            if request.needs_image() && images != 1 {
                bail!("request '{name}': give `image` or `synthetic`");
            }
            if !request.needs_text() && texts > 0 || !request.needs_image() && images > 0 {
                bail!("request '{name}': a field its kind does not use");
            }
            if request.fresh
                && (request.kind != request.shape() || !request.kind.takes_bad_requests())
            {
                bail!("request '{name}': `fresh` is for text, compat_text, image and compat_image");
            }
            if let Some(synthetic) = request.synthetic {
                let pixels = u64::from(synthetic.width) * u64::from(synthetic.height);
                if synthetic.width == 0 || synthetic.height == 0 || pixels > 50_000_000 {
                    bail!("request '{name}': synthetic images are 1 to 50,000,000 pixels");
                }
            }
        }
        let mut names: Vec<&str> = self.requests.iter().map(|r| r.name.as_str()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            bail!("two requests share a name");
        }
        Ok(())
    }

    /// Sets `fresh` on every request that can carry a stamp (texts, and JPEG images: a
    /// synthetic one or a `.jpg`/`.jpeg` file); returns how many are fresh.
    pub fn make_fresh(&mut self) -> usize {
        for request in &mut self.requests {
            let jpeg = request.synthetic.is_some()
                || request
                    .image
                    .as_deref()
                    .is_some_and(|path| content_type_of(path) == "image/jpeg");
            request.fresh |= match request.kind {
                Kind::Text | Kind::CompatText => true,
                Kind::Image | Kind::CompatImage => jpeg,
                _ => false,
            };
        }
        self.requests.iter().filter(|r| r.fresh).count()
    }

    pub fn resolve(&self, path: &Path) -> PathBuf {
        self.base.join(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_are_checked() {
        let base = Path::new(".");
        let ok = "name = \"s\"\n[[requests]]\nname = \"a\"\nkind = \"text\"\nweight = 1\ntext = \"hi\"\n";
        let scenario = Scenario::parse(ok, base).unwrap();
        assert_eq!(scenario.workflow, "default");
        let on_image = "name = \"s\"\n[[requests]]\nname = \"a\"\nkind = \"malformed\"\non = \"image\"\nweight = 1\nimage = \"x.png\"\n";
        let scenario = Scenario::parse(on_image, base).unwrap();
        assert_eq!(scenario.requests[0].shape(), Kind::Image);
        for bad in [
            "name = \"s\"\nrequests = []\n",
            "name = \"s\"\n[[requests]]\nname = \"a\"\nkind = \"text\"\nweight = 1\n",
            "name = \"s\"\n[[requests]]\nname = \"a\"\nkind = \"image\"\nweight = 1\ntext = \"x\"\n",
            "name = \"s\"\n[[requests]]\nname = \"a\"\nkind = \"text\"\nweight = 0\ntext = \"x\"\n",
            "name = \"s\"\n[[requests]]\nname = \"a\"\nkind = \"text\"\nweight = 1\ntext = \"x\"\ncolour = 1\n",
            "name = \"s\"\n[[requests]]\nname = \"a\"\nkind = \"image\"\nweight = 1\nsynthetic = { width = 10000, height = 10000 }\n",
            "name = \"s\"\n[[requests]]\nname = \"a\"\nkind = \"bad_key\"\non = \"health\"\nweight = 1\n",
            "name = \"s\"\n[[requests]]\nname = \"a\"\nkind = \"text\"\non = \"image\"\nweight = 1\ntext = \"x\"\n",
            "name = \"s\"\n[[requests]]\nname = \"a\"\nkind = \"malformed\"\non = \"image\"\nweight = 1\ntext = \"x\"\n",
            "name = \"s\"\n[[requests]]\nname = \"a\"\nkind = \"health\"\nweight = 1\nfresh = true\n",
            "name = \"s\"\n[[requests]]\nname = \"a\"\nkind = \"bad_key\"\nweight = 1\ntext = \"x\"\nfresh = true\n",
            "name = \"s\"\n[[requests]]\nname = \"a\"\nkind = \"url\"\nweight = 1\nimage = \"x.jpg\"\nfresh = true\n",
        ] {
            assert!(Scenario::parse(bad, base).is_err(), "{bad}");
        }
    }

    #[test]
    fn fresh_goes_on_texts_and_jpeg_images_only() {
        let mut scenario = Scenario::parse(
            concat!(
                "name = \"s\"\n",
                "[[requests]]\nname = \"t\"\nkind = \"compat_text\"\nweight = 1\ntext = \"x\"\n",
                "[[requests]]\nname = \"j\"\nkind = \"image\"\nweight = 1\nimage = \"a.JPG\"\n",
                "[[requests]]\nname = \"s\"\nkind = \"compat_image\"\nweight = 1\nsynthetic = { width = 8, height = 8 }\n",
                "[[requests]]\nname = \"p\"\nkind = \"image\"\nweight = 1\nimage = \"a.png\"\n",
                "[[requests]]\nname = \"u\"\nkind = \"url\"\nweight = 1\nimage = \"a.jpg\"\n",
                "[[requests]]\nname = \"b\"\nkind = \"bad_key\"\nweight = 1\ntext = \"x\"\n",
                "[[requests]]\nname = \"m\"\nkind = \"malformed\"\non = \"image\"\nweight = 1\nimage = \"a.jpg\"\n",
                "[[requests]]\nname = \"h\"\nkind = \"health\"\nweight = 1\n",
            ),
            Path::new("."),
        )
        .unwrap();
        assert_eq!(scenario.make_fresh(), 3);
        let fresh: Vec<&str> = scenario
            .requests
            .iter()
            .filter(|r| r.fresh)
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(fresh, ["t", "j", "s"]);
        // What it made passes the scenario's own rules.
        scenario.validate().unwrap();
    }

    #[test]
    fn the_shipped_scenarios_load() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios");
        let mut count = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                Scenario::load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                count += 1;
            }
        }
        assert!(count >= 4);
    }
}
