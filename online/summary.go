package online

// Summary is a read-only view of the model's state, for reports, metrics and
// snapshot inspection.
type Summary struct {
	Events          uint64  `json:"events"`           // events learned from
	Users           int     `json:"users"`            // users with a row of their own (with no bounds: distinct users seen)
	Items           int     `json:"items"`            // items with a row of their own (with no bounds: distinct items seen)
	Distilled       uint64  `json:"distilled"`        // observed events that received a distilled label
	DistilledShare  float64 `json:"distilled_share"`  // Distilled / Events
	Rho             float64 `json:"rho"`              // current ρ of the distillation threshold (1+ρ)/2
	Refits          uint64  `json:"refits"`           // GMM refits so far
	NumericalErrors uint64  `json:"numerical_errors"` // updates discarded for non-finite values
	// With bounds (Config.MaxUsers, MaxItems, AdmitAfter): the caps (0:
	// none), the ids evicted so far (an id admitted ever is resident or
	// evicted, so admitted = Users + UsersEvicted), and the events whose
	// user or item was not admitted and was scored with the cold row.
	MaxUsers       int        `json:"max_users,omitempty"`
	MaxItems       int        `json:"max_items,omitempty"`
	UsersEvicted   uint64     `json:"users_evicted,omitempty"`
	ItemsEvicted   uint64     `json:"items_evicted,omitempty"`
	ColdUserEvents uint64     `json:"cold_user_events,omitempty"`
	ColdItemEvents uint64     `json:"cold_item_events,omitempty"`
	GMM            GMMSummary `json:"gmm"`
	// MeanTransition is the mean T̂(x) (K×K, row-major rows) over the
	// observed events of the last refit period.
	MeanTransition [][]float64 `json:"mean_transition"`
	// UnrankedTypes are the event types seen, on slots of their own, that
	// Config.EventOrder does not list (Model.UnrankedTypes).
	UnrankedTypes []string `json:"unranked_types,omitempty"`
	// OutOfOrderTypes are the event types Config.EventOrder lists that
	// the model reads as unranked, the classifier ranking them below a
	// lower-ranked type (Model.OutOfOrderTypes).
	OutOfOrderTypes []string `json:"out_of_order_types,omitempty"`
	// UserPriorStrength is k of the users' priors (userprior.go): how
	// many of the stream's events a user's prior counts, small where a
	// few users send most of the noise, 1000 where the users do not
	// differ (or before it has the events to tell); 0 in a model without
	// the prior.
	UserPriorStrength float64 `json:"user_prior_strength,omitempty"`
	// ItemPriorStrength is k of the items' priors (itemprior.go): small
	// where a few items draw most of the noise (clickbait, a trending
	// slot), 1000 where the items do not differ; 0 in a model without it.
	ItemPriorStrength float64 `json:"item_prior_strength,omitempty"`
	// Burst is the burst the gaps' mixture finds and the weight reads, or
	// the classifier disputes (burst.go); nil where it finds neither, or
	// the model has no mixture.
	Burst *BurstSummary `json:"burst,omitempty"`
}

// BurstSummary describes a burst: clicks that come within seconds of the
// user's previous one, which the weight reads as the more often noise, or,
// Disputed, whose clicks the classifier places above the others: the
// premise that quick clicks are the more often noise is then in doubt on
// the stream, and the weight does not read the burst (burst.go).
type BurstSummary struct {
	CentreSeconds float64 `json:"centre_seconds"`     // the burst component's centre, e^mean − 1
	Share         float64 `json:"share"`              // its share of the gaps
	Disputed      bool    `json:"disputed,omitempty"` // the classifier places its clicks above the others
	// PCleanSlope is the slope at which the gap path's level reads
	// p_clean's log-odds while the burst is read (at most 1); 0 for a
	// disputed one.
	PCleanSlope float64 `json:"p_clean_slope,omitempty"`
}

// GMMSummary describes the fitted two-component mixture over the
// reliability features (score f_ỹ(x), log(1 + c_ui)).
type GMMSummary struct {
	Fitted     bool            `json:"fitted"`
	Reliable   int             `json:"reliable"` // index of the reliable component
	Components [2]GMMComponent `json:"components"`
}

// GMMComponent is one Gaussian of the mixture.
type GMMComponent struct {
	Weight float64       `json:"weight"`
	Mean   [2]float64    `json:"mean"`
	Cov    [2][2]float64 `json:"cov"`
}
