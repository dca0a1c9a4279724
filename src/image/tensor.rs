//! A model's input tensor made from a decoded image by a declared recipe: the size, how the
//! image is brought to it, the channel order, the memory layout, and a mean and scale per
//! channel. This is how an operator's own classifier (`[[models.custom]]`,
//! [`crate::checks::custom`]) is fed: the shipped models have exact recipes of their own in
//! [`super::resize`].

use serde::Deserialize;

use super::raster::Rgb8;
use super::resize::{crop, pillow_bilinear};

/// How an image tensor is laid out in memory, batch first.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// Batch, height, width, channels (TensorFlow, Keras).
    #[default]
    Nhwc,
    /// Batch, channels, height, width (PyTorch, Caffe).
    Nchw,
}

impl Layout {
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Nhwc => "nhwc",
            Layout::Nchw => "nchw",
        }
    }

    /// The tensor's shape for `rows` images of `height` x `width` x `channels`.
    pub fn shape(self, rows: usize, [height, width, channels]: [usize; 3]) -> [usize; 4] {
        match self {
            Layout::Nhwc => [rows, height, width, channels],
            Layout::Nchw => [rows, channels, height, width],
        }
    }
}

/// The order of the colour channels the model reads.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ColourOrder {
    #[default]
    Rgb,
    Bgr,
}

/// How the image is brought to the model's size.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Fit {
    /// Resized to exactly the size, the aspect ratio not kept.
    #[default]
    Stretch,
    /// The middle of the image with the model's aspect ratio, resized to the size (the
    /// aspect ratio kept, the edges of the long side lost).
    CenterCrop,
}

/// A declared input recipe. Each value is `(pixel - mean[c]) * scale[c]`, the pixel from 0
/// to 255 and `c` the channel in the model's order.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorRecipe {
    pub height: usize,
    pub width: usize,
    pub layout: Layout,
    pub colour: ColourOrder,
    pub fit: Fit,
    pub mean: [f32; 3],
    pub scale: [f32; 3],
}

impl TensorRecipe {
    /// Floats of one image's input.
    pub fn input_len(&self) -> usize {
        self.height * self.width * 3
    }

    /// Writes one image's input into `out` (`self.input_len()` floats).
    pub fn write(&self, image: &Rgb8, out: &mut [f32]) {
        assert_eq!(
            out.len(),
            self.input_len(),
            "the input buffer is one image's"
        );
        let sized = self.sized(image);
        let plane = self.height * self.width;
        for (at, pixel) in sized.pixels.chunks_exact(3).enumerate() {
            for channel in 0..3 {
                let source = match self.colour {
                    ColourOrder::Rgb => channel,
                    ColourOrder::Bgr => 2 - channel,
                };
                let value = (f32::from(pixel[source]) - self.mean[channel]) * self.scale[channel];
                let index = match self.layout {
                    Layout::Nhwc => at * 3 + channel,
                    Layout::Nchw => channel * plane + at,
                };
                out[index] = value;
            }
        }
    }

    /// `image` at the model's size.
    fn sized(&self, image: &Rgb8) -> Rgb8 {
        let (width, height) = (self.width, self.height);
        match self.fit {
            Fit::Stretch => pillow_bilinear(image, width, height),
            Fit::CenterCrop => {
                // The middle of the image with the model's aspect ratio, cut first: resizing
                // the whole image to cover the size first would cost memory in proportion to
                // its aspect ratio (a 16,384 x 1 image is allowed).
                let (iw, ih) = (image.width as u64, image.height as u64);
                let (w, h) = (width as u64, height as u64);
                let (cut_width, cut_height) = if iw * h > ih * w {
                    (((ih * w + h / 2) / h).clamp(1, iw), ih)
                } else {
                    (iw, ((iw * h + w / 2) / w).clamp(1, ih))
                };
                let (cut_width, cut_height) = (cut_width as usize, cut_height as usize);
                let middle = crop(
                    image,
                    (image.width - cut_width) / 2,
                    (image.height - cut_height) / 2,
                    cut_width,
                    cut_height,
                );
                pillow_bilinear(&middle, width, height)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 x 1: a red pixel, then a blue one.
    fn red_blue() -> Rgb8 {
        Rgb8::new(2, 1, vec![255, 0, 0, 0, 0, 255])
    }

    fn recipe(layout: Layout, colour: ColourOrder) -> TensorRecipe {
        TensorRecipe {
            height: 1,
            width: 2,
            layout,
            colour,
            fit: Fit::Stretch,
            mean: [0.0; 3],
            scale: [1.0; 3],
        }
    }

    #[test]
    fn layouts_and_colour_orders_place_each_value() {
        let mut out = [0.0f32; 6];
        recipe(Layout::Nhwc, ColourOrder::Rgb).write(&red_blue(), &mut out);
        assert_eq!(out, [255.0, 0.0, 0.0, 0.0, 0.0, 255.0]);
        recipe(Layout::Nhwc, ColourOrder::Bgr).write(&red_blue(), &mut out);
        assert_eq!(out, [0.0, 0.0, 255.0, 255.0, 0.0, 0.0]);
        // Planes: all reds, all greens, all blues.
        recipe(Layout::Nchw, ColourOrder::Rgb).write(&red_blue(), &mut out);
        assert_eq!(out, [255.0, 0.0, 0.0, 0.0, 0.0, 255.0]);
        recipe(Layout::Nchw, ColourOrder::Bgr).write(&red_blue(), &mut out);
        assert_eq!(out, [0.0, 255.0, 0.0, 0.0, 255.0, 0.0]);
    }

    #[test]
    fn mean_and_scale_are_per_channel_in_the_models_order() {
        let mut recipe = recipe(Layout::Nhwc, ColourOrder::Bgr);
        recipe.mean = [10.0, 20.0, 30.0];
        recipe.scale = [0.5, 1.0, 2.0];
        let mut out = [0.0f32; 6];
        recipe.write(&red_blue(), &mut out);
        // Red pixel: B 0, G 0, R 255. Blue pixel: B 255, G 0, R 0.
        assert_eq!(out, [-5.0, -20.0, 450.0, 122.5, -20.0, -60.0]);
    }

    #[test]
    fn a_centre_crop_keeps_the_middle() {
        // 3 x 1: black, white, black; cut to 1 x 1 it is the white pixel.
        let image = Rgb8::new(3, 1, vec![0, 0, 0, 255, 255, 255, 0, 0, 0]);
        let recipe = TensorRecipe {
            height: 1,
            width: 1,
            fit: Fit::CenterCrop,
            ..recipe(Layout::Nhwc, ColourOrder::Rgb)
        };
        let mut out = [0.0f32; 3];
        recipe.write(&image, &mut out);
        assert_eq!(out, [255.0; 3]);
    }

    proptest::proptest! {
        #[test]
        fn any_image_fills_the_whole_input(
            width in 1usize..40,
            height in 1usize..40,
            out_width in 1usize..32,
            out_height in 1usize..32,
            crop in proptest::bool::ANY,
            nchw in proptest::bool::ANY,
            seed in 0u64..u64::MAX,
        ) {
            let mut rng = fastrand::Rng::with_seed(seed);
            let pixels = (0..width * height * 3).map(|_| rng.u8(..)).collect();
            let image = Rgb8::new(width, height, pixels);
            let recipe = TensorRecipe {
                height: out_height,
                width: out_width,
                layout: if nchw { Layout::Nchw } else { Layout::Nhwc },
                colour: ColourOrder::Rgb,
                fit: if crop { Fit::CenterCrop } else { Fit::Stretch },
                mean: [127.5; 3],
                scale: [1.0 / 127.5; 3],
            };
            let mut out = vec![f32::NAN; recipe.input_len()];
            recipe.write(&image, &mut out);
            proptest::prop_assert!(out.iter().all(|v| (-1.0..=1.0).contains(v)));
        }
    }
}
