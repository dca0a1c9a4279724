//! The routes of the interface: their paths, methods and the content they check. A leaf, so
//! that metrics and logs can name routes without knowing the request path.

use crate::content::ContentKind;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    Health,
    OpenApi,
    Workflows,
    Text,
    CompatText,
    Image,
    CompatImage,
    /// OpenAI's `POST /v1/moderations`, for its SDKs.
    Moderations,
    /// Google's Perspective `POST /v1alpha1/comments:analyze`.
    Perspective,
    /// The discovery document Google's client libraries read.
    Discovery,
    /// Sightengine's `GET|POST /1.0/check.json`, for its SDKs.
    SightengineCheck,
    /// Sightengine's `POST /1.0/text/check.json`.
    SightengineText,
    /// `/v1/lists` and everything under it: the organization's hash lists.
    Lists,
    /// `POST /v1/feedback`: the organization's judgement of one of its checks.
    Feedback,
    /// `GET /v1/checks/{request_id}`: how one of the organization's checks was decided.
    Checks,
}

impl Route {
    pub const ALL: [Route; 15] = [
        Route::Health,
        Route::OpenApi,
        Route::Workflows,
        Route::Text,
        Route::CompatText,
        Route::Image,
        Route::CompatImage,
        Route::Moderations,
        Route::Perspective,
        Route::Discovery,
        Route::SightengineCheck,
        Route::SightengineText,
        Route::Lists,
        Route::Feedback,
        Route::Checks,
    ];

    /// The route's place in [`Route::ALL`] (for per-route counters).
    pub fn index(self) -> usize {
        match self {
            Route::Health => 0,
            Route::OpenApi => 1,
            Route::Workflows => 2,
            Route::Text => 3,
            Route::CompatText => 4,
            Route::Image => 5,
            Route::CompatImage => 6,
            Route::Moderations => 7,
            Route::Perspective => 8,
            Route::Discovery => 9,
            Route::SightengineCheck => 10,
            Route::SightengineText => 11,
            Route::Lists => 12,
            Route::Feedback => 13,
            Route::Checks => 14,
        }
    }

    pub fn find(path: &str) -> Option<Route> {
        if path.starts_with("/v1/lists/") {
            return Some(Route::Lists);
        }
        if path.starts_with("/v1/checks/") {
            return Some(Route::Checks);
        }
        Route::ALL.into_iter().find(|route| route.path() == path)
    }

    /// The routes in the shape of the third-party API (compatible envelope, `api_secret`).
    pub fn is_compat(self) -> bool {
        matches!(
            self,
            Route::CompatText
                | Route::CompatImage
                | Route::SightengineCheck
                | Route::SightengineText
        )
    }

    pub fn path(self) -> &'static str {
        match self {
            Route::Health => "/health",
            Route::OpenApi => "/openapi.json",
            Route::Workflows => "/v1/workflows",
            Route::Text => "/v1/text",
            Route::CompatText => "/1.0/text/check-workflow.json",
            Route::Image => "/v1/image",
            Route::CompatImage => "/1.0/check-workflow.json",
            Route::Moderations => "/v1/moderations",
            Route::Perspective => "/v1alpha1/comments:analyze",
            Route::Discovery => "/$discovery/rest",
            Route::SightengineCheck => "/1.0/check.json",
            Route::SightengineText => "/1.0/text/check.json",
            Route::Lists => "/v1/lists",
            Route::Feedback => "/v1/feedback",
            Route::Checks => "/v1/checks",
        }
    }

    /// The `Allow` header of the route (GET routes answer HEAD too).
    pub fn allow(self) -> &'static str {
        match self {
            Route::Health
            | Route::OpenApi
            | Route::Workflows
            | Route::Discovery
            | Route::Checks => "GET, HEAD",
            Route::Text
            | Route::CompatText
            | Route::Image
            | Route::Moderations
            | Route::Perspective
            | Route::SightengineText
            | Route::Feedback => "POST",
            Route::CompatImage | Route::SightengineCheck => "GET, POST",
            Route::Lists => "GET, HEAD, POST, DELETE",
        }
    }

    /// The kind of content a check route checks; `None` for the others (not journaled).
    pub fn check_kind(self) -> Option<ContentKind> {
        match self {
            // A moderation request may hold an image too; it is journaled as the text check
            // it mostly is, with the image's scores among its own.
            Route::Text
            | Route::CompatText
            | Route::Moderations
            | Route::Perspective
            | Route::SightengineText => Some(ContentKind::Text),
            Route::Image | Route::CompatImage | Route::SightengineCheck => Some(ContentKind::Image),
            Route::Health
            | Route::OpenApi
            | Route::Workflows
            | Route::Discovery
            | Route::Lists
            | Route::Feedback
            | Route::Checks => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Route;

    #[test]
    fn paths_find_their_routes() {
        for (at, route) in Route::ALL.into_iter().enumerate() {
            assert_eq!(Route::find(route.path()), Some(route));
            assert_eq!(route.index(), at);
        }
        assert_eq!(Route::find("/v1/texts"), None);
        assert_eq!(Route::find("/v1/lists/known/entries"), Some(Route::Lists));
        assert_eq!(Route::find("/v1/listsx"), None);
        assert_eq!(
            Route::find("/v1/checks/01KC0000000000000000000000"),
            Some(Route::Checks)
        );
    }
}
