//! OpenCV 4.11's `fillPoly(mask, [points], 1)` (8-connected, no sub-pixel shift) for the
//! detector's box score: the mean probability is taken over exactly the pixels OpenCV marks,
//! outline included, so that a box scoring near 0.5 is kept or dropped as the reference keeps
//! or drops it (`models/image/ocr.md`, "fillPoly"; `ocr_spec.py check-parts` checks the same
//! arithmetic on 3,000 polygons, many partly outside the mask).
//!
//! Each edge is drawn with OpenCV's 8-connected line (clipped to the mask first when an end
//! lies outside); the inside is filled scanline by scanline with edges in 16.16 fixed point.
//! Written here: `imageproc`'s polygon fill marks other boundary pixels.

/// OpenCV's `clipLine` against `[0, width-1] x [0, height-1]` (Cohen–Sutherland with
/// truncating integer steps): whether any of the line is inside, and the clipped ends (moved
/// even when it is not).
fn clip_line(width: i64, height: i64, a: [i64; 2], b: [i64; 2]) -> (bool, [i64; 2], [i64; 2]) {
    let [mut x1, mut y1] = a;
    let [mut x2, mut y2] = b;
    let (right, bottom) = (width - 1, height - 1);
    let code = |x: i64, y: i64| {
        i64::from(x < 0)
            + i64::from(x > right) * 2
            + i64::from(y < 0) * 4
            + i64::from(y > bottom) * 8
    };
    let (mut c1, mut c2) = (code(x1, y1), code(x2, y2));
    if (c1 & c2) == 0 && (c1 | c2) != 0 {
        if c1 & 12 != 0 {
            let edge = if c1 < 8 { 0 } else { bottom };
            x1 += ((edge - y1) as f64 * (x2 - x1) as f64 / (y2 - y1) as f64) as i64;
            y1 = edge;
            c1 = i64::from(x1 < 0) + i64::from(x1 > right) * 2;
        }
        if c2 & 12 != 0 {
            let edge = if c2 < 8 { 0 } else { bottom };
            x2 += ((edge - y2) as f64 * (x2 - x1) as f64 / (y2 - y1) as f64) as i64;
            y2 = edge;
            c2 = i64::from(x2 < 0) + i64::from(x2 > right) * 2;
        }
        if (c1 & c2) == 0 && (c1 | c2) != 0 {
            if c1 != 0 {
                let edge = if c1 == 1 { 0 } else { right };
                y1 += ((edge - x1) as f64 * (y2 - y1) as f64 / (x2 - x1) as f64) as i64;
                x1 = edge;
                c1 = 0;
            }
            if c2 != 0 {
                let edge = if c2 == 1 { 0 } else { right };
                y2 += ((edge - x2) as f64 * (y2 - y1) as f64 / (x2 - x1) as f64) as i64;
                x2 = edge;
                c2 = 0;
            }
        }
    }
    ((c1 | c2) == 0, [x1, y1], [x2, y2])
}

fn inside(width: i64, height: i64, p: [i64; 2]) -> bool {
    (0..width).contains(&p[0]) && (0..height).contains(&p[1])
}

/// OpenCV's 8-connected `Line` (its `LineIterator`, walked left to right).
fn line(mask: &mut [bool], width: usize, height: usize, a: [i64; 2], b: [i64; 2]) {
    let (w, h) = (width as i64, height as i64);
    let (mut a, mut b) = (a, b);
    if !(inside(w, h, a) && inside(w, h, b)) {
        let (any, ca, cb) = clip_line(w, h, a, b);
        if !any {
            return;
        }
        (a, b) = (ca, cb);
    }
    if b[0] < a[0] {
        (a, b) = (b, a);
    }
    let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
    let step_y = if dy < 0 { -1 } else { 1 };
    let dy = dy.abs();
    let steep = dy > dx;
    let (major, minor) = if steep { (dy, dx) } else { (dx, dy) };
    let mut error = major - 2 * minor;
    let [mut x, mut y] = a;
    for _ in 0..=major {
        if inside(w, h, [x, y]) {
            mask[y as usize * width + x as usize] = true;
        }
        let minor_step = error < 0;
        error += -2 * minor + if minor_step { 2 * major } else { 0 };
        if steep {
            y += step_y;
            x += i64::from(minor_step);
        } else {
            x += 1;
            y += if minor_step { step_y } else { 0 };
        }
    }
}

/// C's integer division (toward zero).
fn c_div(a: i64, b: i64) -> i64 {
    a / b
}

/// An edge for the scanlines: rows `[top, bottom)`, x at `top` and its step per row, 16.16.
struct Edge {
    top: i64,
    bottom: i64,
    x: i64,
    step: i64,
}

/// Marks the pixels of `mask` (`width` x `height`) inside the polygon `points`, outline
/// included, as `cv2.fillPoly` does.
pub fn fill_polygon(mask: &mut [bool], width: usize, height: usize, points: &[[i64; 2]]) {
    assert_eq!(mask.len(), width * height);
    let (w, h) = (width as i64, height as i64);
    let n = points.len();
    let mut edges = Vec::with_capacity(n);
    for i in 0..n {
        let (p0, p1) = (points[(i + n - 1) % n], points[i]);
        line(mask, width, height, p0, p1);
        let (mut c0y, mut c1y) = (p0[1], p1[1]);
        let (mut t0, mut t1) = (p0, p1);
        if !(inside(w, h, t0) && inside(w, h, t1)) {
            let (_, a, b) = clip_line(w, h, t0, t1);
            (t0, t1) = (a, b);
            if t0[1] != t1[1] {
                (c0y, c1y) = (t0[1], t1[1]);
            }
        }
        let (c0x, c1x) = (t0[0] << 16, t1[0] << 16);
        if p0[1] == p1[1] {
            continue;
        }
        let step = c_div(c1x - c0x, c1y - c0y);
        edges.push(if p0[1] < p1[1] {
            Edge {
                top: p0[1],
                bottom: p1[1],
                x: c0x + (p0[1] - c0y) * step,
                step,
            }
        } else {
            Edge {
                top: p1[1],
                bottom: p0[1],
                x: c1x + (p1[1] - c1y) * step,
                step,
            }
        });
    }
    if edges.len() < 2 {
        return;
    }
    let first = edges.iter().map(|e| e.top).min().unwrap_or(0).max(0);
    let last = edges.iter().map(|e| e.bottom).max().unwrap_or(0).min(h);
    let mut xs = Vec::with_capacity(edges.len());
    for y in first..last {
        xs.clear();
        xs.extend(
            edges
                .iter()
                .filter(|e| e.top <= y && y < e.bottom)
                .map(|e| e.x + (y - e.top) * e.step),
        );
        xs.sort_unstable();
        for pair in xs.chunks_exact(2) {
            let (from, to) = ((pair[0] + 65535) >> 16, pair[1] >> 16);
            if from < w && to >= 0 {
                let row = y as usize * width;
                for x in from.max(0)..=to.min(w - 1) {
                    mask[row + x as usize] = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn filled(width: usize, height: usize, points: &[[i64; 2]]) -> Vec<String> {
        let mut mask = vec![false; width * height];
        fill_polygon(&mut mask, width, height, points);
        mask.chunks(width)
            .map(|row| row.iter().map(|&v| if v { '#' } else { '.' }).collect())
            .collect()
    }

    #[test]
    fn a_diamond_matches_opencv() {
        // cv2.fillPoly(np.zeros((7, 7), np.uint8), [np.array([[3, 0], [6, 3], [3, 6], [0, 3]])], 1)
        assert_eq!(
            filled(7, 7, &[[3, 0], [6, 3], [3, 6], [0, 3]]),
            vec!["...#...", "..###..", ".#####.", "#######", ".#####.", "..###..", "...#..."]
        );
    }

    #[test]
    fn a_polygon_partly_outside_is_clipped() {
        // cv2.fillPoly(np.zeros((4, 5), np.uint8), [np.array([[-3, -2], [7, 1], [2, 6]])], 1)
        assert_eq!(
            filled(5, 4, &[[-3, -2], [7, 1], [2, 6]]),
            vec!["####.", "#####", "#####", ".####"]
        );
    }

    proptest! {
        #[test]
        fn any_polygon_fills_without_panicking(
            points in proptest::collection::vec((-50i64..50, -50i64..50), 0..6),
            width in 1usize..30, height in 1usize..30,
        ) {
            let points: Vec<[i64; 2]> = points.into_iter().map(|(x, y)| [x, y]).collect();
            let mut mask = vec![false; width * height];
            fill_polygon(&mut mask, width, height, &points);
        }
    }
}
