/// "a, b, c or d": how every message that refuses a value names the values it would take
/// (configuration keys, command-line options, control requests), one spelling everywhere.
public func choiceList(_ items: [String]) -> String {
    guard items.count > 1 else { return items.first ?? "" }
    return items.dropLast().joined(separator: ", ") + " or " + items[items.count - 1]
}
