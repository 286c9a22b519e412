package guard

import (
	"sync/atomic"

	"github.com/quiver-mcp/quiver/runtime/codes"
)

// Environment selects how unclassified tools are treated.
type Environment string

// The environments.
const (
	// EnvProd denies unclassified tools (spec 000 invariant 5).
	EnvProd Environment = "prod"
	// EnvDev allows them; the caller is expected to log a warning.
	EnvDev Environment = "dev"
)

// Names of the checks, as dry runs report them, in the order they run.
const (
	CheckClassification = "registry_classification"
	CheckDeclaration    = "tool_class_declaration"
	CheckCapability     = "read_only_capability"
	CheckIdempotencyKey = "idempotency_key"
	CheckRegistryParity = "registry_parity"
	CheckDocuments      = "document_guards"
)

// Call is what the guards judge: the upstream tool, the arguments as they
// will be dispatched, and the caller's spec 000 fields and capability.
type Call struct {
	// ServerID and ToolName address the registry entry: the item's server
	// (an upstream's configured name) and the upstream tool name.
	ServerID string
	ToolName string
	// Args are the decoded arguments (map[string]any).
	Args map[string]any
	// DeclaredClass is the caller's informational tool_class ("" when not
	// declared). It never grants anything.
	DeclaredClass Class
	// IdempotencyKey is the caller's key ("" when none).
	IdempotencyKey string
	// ExpectedHashes are the caller's expected_document_hashes.
	ExpectedHashes []ExpectedHash
	// ReadOnly is the caller's capability constraint read_only.
	ReadOnly bool
}

// Check is the outcome of one named check. Err is nil when it passed;
// Skipped checks did not apply.
type Check struct {
	Name    string
	Err     *Error
	Skipped bool
}

// FirstFailure returns the first failed check's error, or nil.
func FirstFailure(cs []Check) *Error {
	for _, c := range cs {
		if c.Err != nil {
			return c.Err
		}
	}
	return nil
}

// Decision is the front door's verdict: the class it derived, and the
// registry version it judged by. The connector refuses a Decision made
// against another version.
type Decision struct {
	RegistryVersion string
	Class           Class
	// Policy is the tool's registry entry, nil when unclassified.
	Policy *ToolPolicy
	// Unclassified is true when the tool is unclassified and was let through
	// because the environment is dev.
	Unclassified bool
}

// Gate is the front door: it judges a call by the registry it was built
// with. It is immutable and safe for concurrent use.
type Gate struct {
	reg         *Registry
	env         Environment
	unavailable bool
}

// NewGate returns a front door judging by reg (nil: the empty registry).
func NewGate(reg *Registry, env Environment) *Gate {
	if reg == nil {
		reg = &Registry{}
	}
	return &Gate{reg: reg, env: env}
}

// UnavailableGate returns a front door for a registry that failed to load:
// it refuses every call with REGISTRY_VERSION_MISMATCH.
func UnavailableGate(env Environment) *Gate {
	return &Gate{reg: &Registry{}, env: env, unavailable: true}
}

// Registry returns the gate's registry (nil for an unavailable gate).
func (g *Gate) Registry() *Registry {
	if g.unavailable {
		return nil
	}
	return g.reg
}

// Version returns the version of the gate's registry ("" when
// unavailable).
func (g *Gate) Version() string {
	if g.unavailable {
		return ""
	}
	return g.reg.Version()
}

// Hides reports whether the tool is hidden from every caller: in prod, a
// tool no manifest classifies, since every call to it is refused. A gate
// whose registry failed to load hides nothing: its calls fail with
// REGISTRY_VERSION_MISMATCH, which says what is wrong.
func (g *Gate) Hides(server, tool string) bool {
	if g.unavailable || g.env != EnvProd {
		return false
	}
	_, ok := g.reg.Lookup(server, tool)
	return !ok
}

// Check runs the front door's checks in order: classification (prod denies
// unclassified tools), the caller's declared class, the read-only
// capability, and the idempotency key of write tools. Every check runs; a
// real call is refused with the first failure (FirstFailure), a dry run
// reports them all.
func (g *Gate) Check(c *Call) (Decision, []Check) {
	if g.unavailable {
		e := deny(codes.RegistryVersionMismatch, "the tool registry could not be loaded; calls are refused until it loads and matches the pinned version")
		return Decision{}, []Check{{Name: CheckClassification, Err: e}}
	}
	d := Decision{RegistryVersion: g.reg.Version(), Class: ClassUnclassified}
	if p, ok := g.reg.Lookup(c.ServerID, c.ToolName); ok {
		d.Class, d.Policy = p.Class, p
	}
	checks := make([]Check, 0, 4)
	checks = append(checks, Check{Name: CheckClassification, Err: classify(d.Class, g.env)})
	d.Unclassified = d.Class == ClassUnclassified && g.env != EnvProd
	checks = append(checks, checkDeclaration(c, d.Class))
	checks = append(checks, Check{Name: CheckCapability, Err: capability(c, d.Class)})
	checks = append(checks, checkKey(c, d.Class))
	return d, checks
}

func classify(class Class, env Environment) *Error {
	if class == ClassUnclassified && env == EnvProd {
		return deny(codes.ToolUnclassifiedDenied, "no tool registry manifest classifies this tool, and unclassified tools are denied in prod")
	}
	return nil
}

func checkDeclaration(c *Call, class Class) Check {
	ch := Check{Name: CheckDeclaration}
	switch {
	case c.DeclaredClass == "":
		ch.Skipped = true
	case class == ClassUnclassified:
		// Nothing to agree with; the declaration grants nothing either way.
		ch.Skipped = true
	case c.DeclaredClass != class:
		ch.Err = deny(codes.ToolClassDeclarationMismatch, "tool_class %q disagrees with the registry, which classifies the tool %s", string(c.DeclaredClass), string(class)).
			at("tool_class").with("declared", string(c.DeclaredClass)).with("registry", string(class))
	}
	return ch
}

// capability refuses a read-only caller anything but a tool the registry
// classifies read: an unclassified tool may write.
func capability(c *Call, class Class) *Error {
	if !c.ReadOnly || class == ClassRead {
		return nil
	}
	return deny(codes.ToolClassMismatch, "the caller is read-only and the tool is %s", string(class)).with("tool_class", string(class))
}

func checkKey(c *Call, class Class) Check {
	if class != ClassWrite {
		return Check{Name: CheckIdempotencyKey, Skipped: c.IdempotencyKey == ""}
	}
	if c.IdempotencyKey == "" {
		return Check{Name: CheckIdempotencyKey, Err: deny(codes.IdempotencyKeyRequired, "write tools require an idempotency_key").at("idempotency_key")}
	}
	return Check{Name: CheckIdempotencyKey}
}

// Connector is the enforcement layer next to the upstream: it holds the
// pinned registry and re-derives everything from it. Repin swaps another
// in atomically (a watched registry changed on disk) and Fail makes it
// refuse every call (the registry on disk is unreadable). It is safe for
// concurrent use.
type Connector struct {
	pinned atomic.Pointer[Registry]
	env    Environment
}

// failedVersion is the version a failed connector is pinned to: no gate
// has it, so every call fails registry parity.
const failedVersion = "unavailable"

// NewConnector returns a connector pinned to reg (nil: the empty registry).
func NewConnector(reg *Registry, env Environment) *Connector {
	c := &Connector{env: env}
	c.Repin(reg)
	return c
}

// Pinned returns the pinned registry.
func (c *Connector) Pinned() *Registry { return c.pinned.Load() }

// Repin pins reg (nil: the empty registry) for every call admitted from
// now on; a call the front door judged under the previous registry fails
// registry parity.
func (c *Connector) Repin(reg *Registry) {
	if reg == nil {
		reg = &Registry{}
	}
	c.pinned.Store(reg)
}

// Fail pins no registry: every call fails registry parity
// (REGISTRY_VERSION_MISMATCH) until Repin.
func (c *Connector) Fail() {
	c.pinned.Store(&Registry{version: failedVersion})
}

// Admission is what the connector admitted: the front door's decision, the
// class re-derived from the pinned registry, and the write-side documents.
type Admission struct {
	Decision
	// Documents are the write-side documents, hashed.
	Documents  []DocumentHash
	BatchBytes int64
}

// Admit runs the connector's pre-dispatch checks: registry parity (the
// decision must have been made against the pinned version; class,
// capability and idempotency key are re-derived from the pinned registry)
// and the write-side document guards (size, encoding, sha256 and the
// caller's expected hashes).
func (c *Connector) Admit(call *Call, d Decision) (Admission, []Check) {
	a := Admission{Decision: d}
	parity := Check{Name: CheckRegistryParity}
	docs := Check{Name: CheckDocuments}
	pinned := c.pinned.Load()
	if v := pinned.Version(); d.RegistryVersion != v {
		gw := d.RegistryVersion
		if gw == "" {
			gw = "unavailable"
		}
		parity.Err = deny(codes.RegistryVersionMismatch, "the front door judged this call by registry %s but the connector is pinned to %s; the registry changed or failed to load on disk", short(gw), short(v)).
			with("gateway_version", gw).with("connector_version", v)
		docs.Skipped = true
		return a, []Check{parity, docs}
	}
	class := pinned.ClassOf(call.ServerID, call.ToolName)
	pol, _ := pinned.Lookup(call.ServerID, call.ToolName)
	a.Class, a.Policy = class, pol
	switch {
	case class != d.Class:
		parity.Err = deny(codes.RegistryVersionMismatch, "the front door and the connector classify this tool differently")
	default:
		if e := classify(class, c.env); e != nil {
			parity.Err = e
		} else if e := capability(call, class); e != nil {
			parity.Err = e
		} else if k := checkKey(call, class); k.Err != nil {
			parity.Err = k.Err
		}
	}
	if parity.Err != nil {
		docs.Skipped = true
		return a, []Check{parity, docs}
	}
	if pol == nil || !pol.IsDocumentOp || pol.Document == nil || len(pol.Document.WriteContentPointers) == 0 {
		docs.Skipped = len(call.ExpectedHashes) == 0
		if !docs.Skipped {
			docs.Err = deny(codes.DocContentPointerInvalid, "expected_document_hashes were given but this tool has no write content pointers").at("expected_document_hashes")
		}
		return a, []Check{parity, docs}
	}
	spec := pol.Document
	got, total, e := Documents(map[string]any(call.Args), spec.WriteContentPointers, spec.ContentEncoding, spec.MaxWriteBytes, spec.MaxBatchBytes)
	if e == nil {
		e = CompareExpected(got, call.ExpectedHashes)
	}
	if e != nil {
		docs.Err = e
		return a, []Check{parity, docs}
	}
	a.Documents, a.BatchBytes = got, total
	return a, []Check{parity, docs}
}

// Verify re-checks, right before dispatch, that the admission was made
// against the pinned registry.
func (c *Connector) Verify(a *Admission) *Error {
	if v := c.pinned.Load().Version(); a.RegistryVersion != v {
		return deny(codes.RegistryVersionMismatch, "the call was admitted under another registry version").
			with("gateway_version", a.RegistryVersion).with("connector_version", v)
	}
	return nil
}

// ReadsDocuments reports whether the admitted tool has read-side document
// guards, so that CheckResult has anything to do.
func (a *Admission) ReadsDocuments() bool {
	p := a.Policy
	return p != nil && p.IsDocumentOp && p.Document != nil && len(p.Document.ReadContentPointers) > 0
}

// CheckResult runs the read-side document guards on an upstream result (a
// decoded JSON value, the MCP result object): the documents at the tool's
// read_content_pointers are decoded, bounded by max_read_bytes each and
// max_batch_bytes together, and hashed.
func (c *Connector) CheckResult(a *Admission, result any) ([]DocumentHash, int64, *Error) {
	if !a.ReadsDocuments() {
		return nil, 0, nil
	}
	spec := a.Policy.Document
	return Documents(result, spec.ReadContentPointers, spec.ContentEncoding, spec.MaxReadBytes, spec.MaxBatchBytes)
}

// short abbreviates a registry version for messages.
func short(v string) string {
	if len(v) > len("sha256:")+12 {
		return v[:len("sha256:")+12]
	}
	return v
}
