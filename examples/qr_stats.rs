//! The QR reader's decode rate (issue 16's proof), written to `models/image/QR_STATS.md`:
//! `cargo run --release --example qr_stats > models/image/QR_STATS.md`.
//!
//! Codes of 20 payloads (links, e-mail addresses, phone numbers, short texts) are drawn with the
//! `qrcode` crate over a committed test photo (`jpeg_baseline_chelsea_451x300.jpg`, scaled to
//! 640 x 427), at several module sizes, rotations and box blurs, and read by
//! [`modgate::image::qr::read`] as the model worker reads the decoded image. A code counts as
//! read when one of the codes found carries its payload exactly.

use modgate::image::qr::read;
use modgate::image::resize::{box_blur, pillow_bilinear};
use modgate::image::Rgb8;

const PAYLOADS: &[&str] = &[
    "https://example.com/",
    "https://win-a-prize.example/claim?id=12345",
    "http://t.me/some_channel",
    "www.cheap-pills.example.org/buy-now",
    "mailto:jane.doe@example.com",
    "jane@example.com",
    "tel:+442079460958",
    "+1 (555) 123-4567",
    "WIFI:S:cafe;T:WPA;P:secret123;;",
    "hello world",
    "Call me at 555-123-4567 tonight",
    "BEGIN:VCARD\nFN:Jane Doe\nTEL:+33123456789\nEND:VCARD",
    "https://bit.ly/3xYzAbC",
    "Scan to follow us!",
    "https://example.org/a/very/long/path/that/makes/the/code/denser/than/the/others/abc",
    "DE89370400440532013000",
    "promo code SAVE20",
    "https://shop.example/p/42",
    "geo:48.8566,2.3522",
    "¿Qué tal? Ça va.",
];
const MODULES_PX: &[f64] = &[1.5, 2.0, 3.0, 4.0, 6.0];
const ROTATIONS_DEG: &[f64] = &[0.0, 10.0, 30.0, 45.0];
const BLURS_PX: &[usize] = &[0, 1, 2];

fn main() {
    let photo = background();
    println!("# QR codes: decode rate\n");
    println!(
        "Made by `examples/qr_stats.rs` (`cargo run --release --example qr_stats`): {} payloads \
         per cell, each drawn with the `qrcode` crate (error correction M, 4-module quiet zone) \
         at the centre of a 640 x 427 photo, rotated, blurred with a box filter of the given \
         radius, then read by `modgate::image::qr::read` as the model worker reads the decoded \
         image.\n",
        PAYLOADS.len()
    );
    for &blur in BLURS_PX {
        println!("## Box blur radius {blur} px\n");
        print!("| module size |");
        for rotation in ROTATIONS_DEG {
            print!(" {rotation}° |");
        }
        println!();
        println!("|---|{}", "---|".repeat(ROTATIONS_DEG.len()));
        for &module in MODULES_PX {
            print!("| {module} px |");
            for &rotation in ROTATIONS_DEG {
                let read_ok = PAYLOADS
                    .iter()
                    .filter(|payload| {
                        let image = box_blur(&drawn(&photo, payload, module, rotation), blur);
                        read(&image)
                            .unwrap_or_default()
                            .iter()
                            .any(|code| code.payload == **payload)
                    })
                    .count();
                print!(" {read_ok}/{} |", PAYLOADS.len());
            }
            println!();
        }
        println!();
    }
}

fn background() -> Rgb8 {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/image/testimages/jpeg_baseline_chelsea_451x300.jpg"
    );
    let bytes = std::fs::read(path).expect("the test photo");
    let probe = modgate::image::probe::probe(&bytes).expect("a JPEG");
    let image = modgate::image::decode::decode(&bytes, &probe, usize::MAX).expect("decodes");
    pillow_bilinear(&image, 640, 427)
}

/// `payload`'s code, `module` px per module, rotated by `degrees` about the photo's centre.
fn drawn(photo: &Rgb8, payload: &str, module: f64, degrees: f64) -> Rgb8 {
    let code = qrcode::QrCode::with_error_correction_level(payload.as_bytes(), qrcode::EcLevel::M)
        .expect("a QR code");
    let side = code.width();
    let colors = code.to_colors();
    let quiet = 4.0;
    let modules = side as f64 + 2.0 * quiet;
    let half = modules * module / 2.0;
    let (cx, cy) = (photo.width as f64 / 2.0, photo.height as f64 / 2.0);
    let (sin, cos) = degrees.to_radians().sin_cos();
    let mut out = photo.clone();
    for y in 0..photo.height {
        for x in 0..photo.width {
            // Back into the code's frame.
            let (dx, dy) = (x as f64 + 0.5 - cx, y as f64 + 0.5 - cy);
            let (u, v) = (dx * cos + dy * sin + half, -dx * sin + dy * cos + half);
            if u < 0.0 || v < 0.0 || u >= modules * module || v >= modules * module {
                continue;
            }
            let (mx, my) = ((u / module - quiet).floor(), (v / module - quiet).floor());
            let dark = mx >= 0.0
                && my >= 0.0
                && (mx as usize) < side
                && (my as usize) < side
                && colors[my as usize * side + mx as usize] == qrcode::Color::Dark;
            let value = if dark { 0 } else { 255 };
            out.pixels[(y * photo.width + x) * 3..][..3].fill(value);
        }
    }
    out
}
