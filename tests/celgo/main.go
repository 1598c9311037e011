// Command celgo judges a ValidatingAdmissionPolicy's CEL with cel-go, set up as the API server sets it up
// (k8s.io/apiserver pkg/cel/environment/base.go, pkg/admission/plugin/cel), and reports the actual cost of every
// expression. It reads {"perCallLimit", "policy": {matchConditions, variables, validations}, "requests": [...]} on
// stdin and writes one result per request; tests/celgo_cost.py holds the API server's budget rule.
package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
	"google.golang.org/protobuf/types/known/structpb"
)

type named struct {
	Name       string `json:"name"`
	Expression string `json:"expression"`
}

type validation struct {
	Expression        string `json:"expression"`
	MessageExpression string `json:"messageExpression"`
}

type input struct {
	PerCallLimit uint64 `json:"perCallLimit"`
	Policy       struct {
		MatchConditions []named      `json:"matchConditions"`
		Variables       []named      `json:"variables"`
		Validations     []validation `json:"validations"`
	} `json:"policy"`
	Requests []map[string]any `json:"requests"`
}

// outcome is one evaluation: its value or error, its own cost, and the cost of the variables it evaluated first
// (the API server charges those to the same budget, once per ForInput).
type outcome struct {
	Value         any    `json:"value"`
	Error         string `json:"error,omitempty"`
	Cost          uint64 `json:"cost"`
	VariablesCost uint64 `json:"variablesCost"`
}

type result struct {
	Match       []outcome          `json:"match"`
	Validations []outcome          `json:"validations"`
	Messages    []*outcome         `json:"messages"`
	Variables   map[string]outcome `json:"variables"`
}

// Kubernetes' runtime prices (k8s.io/apiserver pkg/cel/library/cost.go CallCost) of the library functions the
// policies call; nil leaves every other call to cel-go's own prices.
type kubernetesPrices struct{}

func (kubernetesPrices) CallCost(function, _ string, args []ref.Val, result ref.Val) *uint64 {
	var cost uint64
	switch {
	case function == "sum" && len(args) > 0:
		cost = traversal(args[0])
	case function == "substring" && len(args) > 0:
		cost = uint64(math.Ceil(float64(size(args[0])) * 0.1))
	case function == "join" && len(args) > 0:
		cost = uint64(math.Ceil(float64(size(result)) * 2 * 0.1))
	default:
		return nil
	}
	return &cost
}

func size(value ref.Val) uint64 {
	if sized, ok := value.(traits.Sizer); ok {
		return uint64(sized.Size().(types.Int))
	}
	return 1
}

func traversal(value ref.Val) uint64 {
	switch v := value.(type) {
	case types.String:
		return uint64(float64(len(string(v))) * 0.1)
	case traits.Lister:
		var cost uint64
		for it := v.Iterator(); it.HasNext() == types.True; {
			cost += traversal(it.Next())
		}
		return cost
	}
	return 1
}

func sumInts(list ref.Val) ref.Val {
	var total types.Int
	for it := list.(traits.Lister).Iterator(); it.HasNext() == types.True; {
		total += it.Next().(types.Int)
	}
	return total
}

func environment() (*cel.Env, *variableFields, error) {
	options := []cel.EnvOption{
		cel.HomogeneousAggregateLiterals(), cel.EagerlyValidateDeclarations(true), cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true), cel.OptionalTypes(),
		cel.ASTValidators(cel.ValidateDurationLiterals(), cel.ValidateTimestampLiterals(), cel.ValidateRegexLiterals(),
			cel.ValidateHomogeneousAggregateLiterals()),
		ext.Strings(ext.StringsVersion(2)), ext.Sets(), ext.TwoVarComprehensions(), ext.Lists(ext.ListsVersion(3)),
		cel.CostEstimatorOptions(checker.PresenceTestHasCost(false)),
		cel.Function("sum", cel.MemberOverload("list_int_sum", []*cel.Type{cel.ListType(cel.IntType)}, cel.IntType,
			cel.UnaryBinding(sumInts))),
	}
	for _, name := range []string{"object", "oldObject", "request", "params", "namespaceObject"} {
		options = append(options, cel.Variable(name, cel.DynType))
	}
	env, err := cel.NewEnv(options...)
	if err != nil {
		return nil, nil, err
	}
	fields := &variableFields{Provider: env.CELTypeProvider(), types: map[string]*types.Type{}}
	env, err = env.Extend(cel.CustomTypeProvider(fields), cel.Variable("variables", cel.ObjectType(variablesType)))
	return env, fields, err
}

// The API server declares `variables` as an object whose fields are typed by the variables' own expressions, each
// compiled after the ones before it (pkg/admission/plugin/cel/composition.go): the overloads cel-go resolves, and
// so the prices of calls on a variable's value, depend on those types.
const variablesType = "kubernetes.variables"

type variableFields struct {
	types.Provider
	types map[string]*types.Type
}

func (f *variableFields) FindStructType(name string) (*types.Type, bool) {
	if name == variablesType {
		return types.NewTypeTypeWithParam(types.NewObjectType(variablesType)), true
	}
	return f.Provider.FindStructType(name)
}

func (f *variableFields) FindStructFieldNames(name string) ([]string, bool) {
	if name != variablesType {
		return f.Provider.FindStructFieldNames(name)
	}
	names := make([]string, 0, len(f.types))
	for field := range f.types {
		names = append(names, field)
	}
	return names, true
}

func (f *variableFields) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if name != variablesType {
		return f.Provider.FindStructFieldType(name, field)
	}
	fieldType, found := f.types[field]
	if !found {
		return nil, false
	}
	return &types.FieldType{Type: fieldType,
		IsSet: func(vars any) bool { _, declared := vars.(*lazyVariables).programs[field]; return declared },
		GetFrom: func(vars any) (any, error) {
			value := vars.(*lazyVariables).resolve(field)
			if failed, isErr := value.(*types.Err); isErr {
				return nil, failed
			}
			return value, nil
		}}, true
}

type compiler struct {
	env     *cel.Env
	options []cel.ProgramOption
}

func (c compiler) compile(expression string) (cel.Program, *types.Type, error) {
	ast, issues := c.env.Compile(expression)
	if issues != nil && issues.Err() != nil {
		return nil, nil, fmt.Errorf("%q does not compile: %w", expression, issues.Err())
	}
	program, err := c.env.Program(ast, c.options...)
	return program, ast.OutputType(), err
}

// lazyVariables is `variables` as the API server's composition gives it: each evaluated on first use, once.
type lazyVariables struct {
	programs   map[string]cel.Program
	activation map[string]any
	values     map[string]ref.Val
	charged    uint64
	seen       map[string]outcome
}

func newVariables(programs map[string]cel.Program, request map[string]any, seen map[string]outcome) *lazyVariables {
	vars := &lazyVariables{programs: programs, activation: map[string]any{}, values: map[string]ref.Val{}, seen: seen}
	for _, name := range []string{"object", "oldObject", "request", "params", "namespaceObject"} {
		vars.activation[name] = request[name]
	}
	vars.activation["variables"] = vars
	return vars
}

func (v *lazyVariables) resolve(name string) ref.Val {
	if value, done := v.values[name]; done {
		return value
	}
	before := v.charged
	evaluated := evaluate(v.programs[name], v.activation)
	v.charged += evaluated.Cost
	evaluated.VariablesCost = v.charged - before - evaluated.Cost
	v.seen[name] = evaluated.outcome
	v.values[name] = evaluated.value
	return evaluated.value
}

func (v *lazyVariables) Find(key ref.Val) (ref.Val, bool) {
	name, ok := key.(types.String)
	if _, declared := v.programs[string(name)]; !ok || !declared {
		return nil, false
	}
	return v.resolve(string(name)), true
}

func (v *lazyVariables) Get(key ref.Val) ref.Val {
	if value, found := v.Find(key); found {
		return value
	}
	return types.NewErr("no such key: %v", key)
}

func (v *lazyVariables) Contains(key ref.Val) ref.Val {
	_, found := v.Find(key)
	return types.Bool(found)
}
func (v *lazyVariables) Size() ref.Val               { return types.Int(len(v.programs)) }
func (v *lazyVariables) Type() ref.Type              { return types.MapType }
func (v *lazyVariables) Value() any                  { return v }
func (v *lazyVariables) Equal(other ref.Val) ref.Val { return types.Bool(other == ref.Val(v)) }

func (v *lazyVariables) Iterator() traits.Iterator {
	names := make([]string, 0, len(v.programs))
	for name := range v.programs {
		names = append(names, name)
	}
	return types.DefaultTypeAdapter.NativeToValue(names).(traits.Lister).Iterator()
}

func (v *lazyVariables) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return nil, fmt.Errorf("variables cannot become %v", typeDesc)
}

func (v *lazyVariables) ConvertToType(typeValue ref.Type) ref.Val {
	if typeValue == types.MapType {
		return v
	}
	return types.NewErr("variables cannot become %v", typeValue)
}

type evaluation struct {
	outcome
	value ref.Val
}

func evaluate(program cel.Program, activation map[string]any) evaluation {
	value, details, err := program.Eval(activation)
	result := evaluation{value: value}
	if details != nil && details.ActualCost() != nil {
		result.Cost = *details.ActualCost()
	}
	if err != nil {
		result.Error = err.Error()
		result.value = types.NewErr("%v", err)
		return result
	}
	native, convertErr := value.ConvertToNative(reflect.TypeOf(&structpb.Value{}))
	if convertErr != nil {
		result.Value = fmt.Sprint(value)
	} else {
		result.Value = native.(*structpb.Value).AsInterface()
	}
	return result
}

// phase evaluates programs against one request with a fresh variables cache, as one ForInput of the API server.
func phase(programs []cel.Program, variables map[string]cel.Program, request map[string]any, seen map[string]outcome) []*outcome {
	vars := newVariables(variables, request, seen)
	outcomes := make([]*outcome, len(programs))
	for i, program := range programs {
		if program == nil {
			continue
		}
		before := vars.charged
		evaluated := evaluate(program, vars.activation)
		evaluated.VariablesCost = vars.charged - before
		outcomes[i] = &evaluated.outcome
	}
	return outcomes
}

func plain(outcomes []*outcome) []outcome {
	values := make([]outcome, len(outcomes))
	for i, each := range outcomes {
		values[i] = *each
	}
	return values
}

func integers(value any) any {
	switch v := value.(type) {
	case json.Number:
		if whole, err := v.Int64(); err == nil {
			return whole
		}
		number, _ := v.Float64()
		return number
	case map[string]any:
		for key, item := range v {
			v[key] = integers(item)
		}
	case []any:
		for i, item := range v {
			v[i] = integers(item)
		}
	}
	return value
}

func run() error {
	decoder := json.NewDecoder(os.Stdin)
	decoder.UseNumber()
	var in input
	if err := decoder.Decode(&in); err != nil {
		return err
	}
	env, fields, err := environment()
	if err != nil {
		return err
	}
	c := compiler{env, []cel.ProgramOption{
		cel.EvalOptions(cel.OptOptimize, cel.OptTrackCost), cel.CostLimit(in.PerCallLimit),
		cel.CostTrackerOptions(interpreter.PresenceTestHasCost(false)), cel.CostTracking(kubernetesPrices{})}}
	var problems []string
	compile := func(expression string) cel.Program {
		program, _, err := c.compile(expression)
		if err != nil {
			problems = append(problems, err.Error())
		}
		return program
	}
	variables := map[string]cel.Program{}
	for _, variable := range in.Policy.Variables {
		program, outputType, err := c.compile(variable.Expression)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		variables[variable.Name], fields.types[variable.Name] = program, outputType
	}
	var match, validations, messages []cel.Program
	for _, condition := range in.Policy.MatchConditions {
		match = append(match, compile(condition.Expression))
	}
	for _, each := range in.Policy.Validations {
		validations = append(validations, compile(each.Expression))
		var message cel.Program
		if each.MessageExpression != "" {
			message = compile(each.MessageExpression)
		}
		messages = append(messages, message)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	results := make([]result, len(in.Requests))
	for i, request := range in.Requests {
		request = integers(request).(map[string]any)
		seen := map[string]outcome{}
		results[i] = result{Match: plain(phase(match, variables, request, seen)), Variables: seen}
		results[i].Validations = plain(phase(validations, variables, request, seen))
		results[i].Messages = phase(messages, variables, request, map[string]outcome{})
	}
	return json.NewEncoder(os.Stdout).Encode(results)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
